package formats

import (
	"bytes"
	"encoding/json"

	"toolbelt/services/tooldef"
)

// Anthropic's tool search lets a Claude agent keep a large catalog out of
// its context: every tool is sent with defer_loading, one search tool is
// not, and the search tool's result holds tool_reference blocks, which the
// Messages API expands into the deferred tools they name (its "custom tool
// search"). Toolbelt's selection is that search: the agent answers a call
// of SearchToolName with the tool_references of POST /tools/select.

// SearchToolName is the search tool an agent offers Claude beside the
// deferred catalog: the name MCP clients know for the same search, which
// no registered tool may take.
const SearchToolName = tooldef.MCPSearchTools

// Deferred is an anthropic rendering marked defer_loading: Claude sees it
// only once a tool_reference names it. Renderings are compact JSON
// objects made by Render, so the field is written before the closing
// brace; another object is decoded and encoded again, and what is not an
// object comes back unchanged.
func Deferred(rendering json.RawMessage) json.RawMessage {
	trimmed := bytes.TrimRight(rendering, " \t\r\n")
	if len(trimmed) < 2 || trimmed[0] != '{' || trimmed[len(trimmed)-1] != '}' {
		var obj map[string]any
		if json.Unmarshal(rendering, &obj) != nil || obj == nil {
			return rendering
		}
		obj["defer_loading"] = true
		out, _ := json.Marshal(obj)
		return out
	}
	out := make([]byte, 0, len(trimmed)+len(`,"defer_loading":true`))
	out = append(out, trimmed[:len(trimmed)-1]...)
	if len(bytes.TrimSpace(trimmed[1:len(trimmed)-1])) > 0 {
		out = append(out, ',')
	}
	return append(out, `"defer_loading":true}`...)
}

// AnthropicSearchTool is the tool an agent puts, not deferred, beside a
// deferred catalog: Claude calls it with the task, and the agent answers
// with the tool_references of POST /tools/select for that query.
func AnthropicSearchTool() json.RawMessage {
	return json.RawMessage(`{"name":"` + SearchToolName + `",` +
		`"description":"Find the tools that fit a task, best first; the tools found become available to call. ` +
		`Input: query (the task in a sentence). Output: references to the tools.",` +
		`"input_schema":{"type":"object","properties":{"query":{"type":"string","minLength":1,` +
		`"description":"The task the tools are for, e.g. read the config file"}},"required":["query"],"additionalProperties":false}}`)
}

// ToolReference is a tool_reference content block of the Messages API: in
// a tool_result, it makes the deferred tool it names available.
type ToolReference struct {
	Type     string `json:"type" example:"tool_reference"`
	ToolName string `json:"tool_name" example:"file_read"`
}

// ToolReferences are the blocks naming tools, in order.
func ToolReferences(names []string) []ToolReference {
	out := make([]ToolReference, len(names))
	for i, n := range names {
		out[i] = ToolReference{Type: "tool_reference", ToolName: n}
	}
	return out
}
