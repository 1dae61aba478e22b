package web_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"toolbelt/internal/nodetest"
	"toolbelt/services/formats"
)

// TestAnthropicToolSearch: with format=anthropic&defer_loading=true the
// catalog comes deferred, with the search tool to send beside it, and a
// selection in format anthropic names its tools as tool_reference blocks:
// together, a Messages API request for Anthropic's tool search, which the
// SDK's own types (@anthropic-ai/sdk) accept with no cast.
func TestAnthropicToolSearch(t *testing.T) {
	app := newTestApp(t)
	dangerousWrite(t, app)

	r := app.do(t, "agent", "GET", "/api/v1/tools?format=anthropic&defer_loading=true", nil)
	var list struct {
		Tools      []map[string]any `json:"tools"`
		SearchTool map[string]any   `json:"search_tool"`
		Total      int              `json:"total"`
	}
	if err := json.Unmarshal(r.Body, &list); err != nil || r.Status != 200 || len(list.Tools) == 0 || len(list.Tools) != list.Total {
		t.Fatalf("deferred list: %d %v %s", r.Status, err, r.Body)
	}
	for _, tool := range list.Tools {
		if tool["defer_loading"] != true || tool["input_schema"] == nil {
			t.Errorf("%v: defer_loading %v", tool["name"], tool["defer_loading"])
		}
	}
	if list.SearchTool["name"] != formats.SearchToolName || list.SearchTool["defer_loading"] != nil || list.SearchTool["input_schema"] == nil {
		t.Errorf("search tool: %v", list.SearchTool)
	}
	if plain := app.do(t, "agent", "GET", "/api/v1/tools?format=anthropic", nil); strings.Contains(string(plain.Body), "defer_loading") ||
		strings.Contains(string(plain.Body), "search_tool") {
		t.Errorf("without defer_loading: %s", plain.Body)
	}
	for _, bad := range []string{"format=openai&defer_loading=true", "defer_loading=true", "format=anthropic&defer_loading=maybe"} {
		if r := app.do(t, "agent", "GET", "/api/v1/tools?"+bad, nil); r.Status != 400 || !strings.Contains(string(r.Body), "defer_loading") {
			t.Errorf("%s: %d %s", bad, r.Status, r.Body)
		}
	}

	r = app.do(t, "agent", "POST", "/api/v1/tools/select", map[string]any{"query": "read the notes file", "format": "anthropic", "limit": 5})
	var sel struct {
		Tools          []struct{ Name string }
		ToolReferences []map[string]any `json:"tool_references"`
	}
	if err := json.Unmarshal(r.Body, &sel); err != nil || r.Status != 200 || len(sel.Tools) == 0 || len(sel.ToolReferences) != len(sel.Tools) {
		t.Fatalf("select: %d %v %s", r.Status, err, r.Body)
	}
	for i, ref := range sel.ToolReferences {
		if ref["type"] != "tool_reference" || ref["tool_name"] != sel.Tools[i].Name {
			t.Errorf("reference %d: %v, tool %s", i, ref, sel.Tools[i].Name)
		}
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, fmt.Sprint(tool["name"]))
	}
	for _, s := range sel.Tools {
		if !slices.Contains(names, s.Name) {
			t.Errorf("selected %s, which the deferred list does not hold: no tool_reference to it would resolve", s.Name)
		}
	}
	if r := app.do(t, "agent", "POST", "/api/v1/tools/select", map[string]any{"query": "read the notes file", "format": "openai"}); strings.Contains(string(r.Body), "tool_references") {
		t.Errorf("tool_references in an openai selection: %s", r.Body)
	}

	// The request an agent sends Claude: the search tool and the deferred
	// catalog; Claude's call of the search tool; its result, the blocks.
	tools, _ := json.Marshal(append([]map[string]any{list.SearchTool}, list.Tools...))
	refs, _ := json.Marshal(sel.ToolReferences)
	src := fmt.Sprintf(`import type { MessageCreateParamsNonStreaming, ToolUnion, ToolReferenceBlockParam } from "@anthropic-ai/sdk/resources/messages";

export const tools: ToolUnion[] = %s;
export const references: ToolReferenceBlockParam[] = %s;
export const request: MessageCreateParamsNonStreaming = {
  model: "claude-sonnet-4-5",
  max_tokens: 1024,
  tools: %s,
  messages: [
    { role: "user", content: "Read the notes file." },
    { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: %q, input: { query: "read the notes file" } }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: %s }] },
  ],
};
// A control: the types refuse a block the API does not know.
// @ts-expect-error tool_ref is not a content block
export const control: ToolReferenceBlockParam = { type: "tool_ref", tool_name: "x" };
`, tools, refs, tools, formats.SearchToolName, refs)
	if out, err := nodetest.TypeCheck(t, src, "@anthropic-ai/sdk"); err != nil {
		t.Fatalf("the tool search request does not type-check with @anthropic-ai/sdk: %v\n%s", err, out)
	}
}
