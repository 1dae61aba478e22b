package mcpserver

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
	"toolbelt/services/invoke"
)

// TestResult maps each kind of ToolResult to what the model reads.
func TestResult(t *testing.T) {
	cases := []struct {
		name       string
		res        invoke.ToolResult
		isError    bool
		text       []string // substrings of the text, in order
		structured bool
		meta       map[string]string
	}{
		{
			name: "success object",
			res:  invoke.ToolResult{CallID: "c1", Status: models.StatusSucceeded, Success: true, Data: json.RawMessage(`{"content":"hi"}`)},
			text: []string{`{"content":"hi"}`}, structured: true,
			meta: map[string]string{"toolbelt/call_id": "c1", "toolbelt/status": "succeeded"},
		},
		{
			name: "success array is text only",
			res:  invoke.ToolResult{CallID: "c2", Status: models.StatusSucceeded, Success: true, Data: json.RawMessage(`[1,2]`)},
			text: []string{`[1,2]`},
		},
		{
			name: "success without data",
			res:  invoke.ToolResult{CallID: "c3", Status: models.StatusSucceeded, Success: true},
			text: []string{`null`},
		},
		{
			name: "refused with a suggestion",
			res: invoke.ToolResult{CallID: "c4", Status: models.StatusRefused, Error: &invoke.ToolError{
				Code: "PATH_NOT_ALLOWED", Message: `path "/etc" is absolute`, Suggestion: "Use a relative path."}},
			isError: true, text: []string{`PATH_NOT_ALLOWED: path "/etc" is absolute. Use a relative path.`},
		},
		{
			name: "validation problems, one a line",
			res: invoke.ToolResult{CallID: "c5", Status: models.StatusRefused, Error: &invoke.ToolError{
				Code: "VALIDATION_ERROR", Message: "the arguments do not match", Suggestion: "Fix the fields listed.",
				Problems: []models.Problem{{Pointer: "", Message: "missing property 'path'"}, {Pointer: "/max_bytes", Message: "must be >= 1"}}}},
			isError: true,
			text:    []string{"VALIDATION_ERROR: the arguments do not match.", "\n- (arguments): missing property 'path'", "\n- /max_bytes: must be >= 1", "\nFix the fields listed."},
		},
		{
			name: "rate limited",
			res: invoke.ToolResult{CallID: "c7", Status: models.StatusRefused, Error: &invoke.ToolError{
				Code: "RATE_LIMIT_EXCEEDED", Message: "too many calls", RetryAfter: 7}},
			isError: true, text: []string{"RATE_LIMIT_EXCEEDED: too many calls.", "Retry after 7 s."},
		},
		{
			name: "awaiting approval",
			res: invoke.ToolResult{CallID: "c8", Status: models.StatusAwaitingApproval, Data: json.RawMessage(`{"approval_id":"a8"}`),
				Error: &invoke.ToolError{Code: "CONFIRMATION_REQUIRED", Message: "x needs a reviewer's approval for this call", Retryable: true,
					Suggestion: "Tell the user the call waits for approval (it expires at T). Check later with call_result {\"call_id\": \"c8\"} for the result."}},
			isError: true,
			text: []string{"CONFIRMATION_REQUIRED: x needs a reviewer's approval for this call.", "The call c8 waits for a human reviewer",
				"expires at T", `Check later with call_result {"call_id": "c8"}`, `call call_result {"call_id": "c8", "wait_seconds": 50}.`},
			meta: map[string]string{"toolbelt/approval_id": "a8", "toolbelt/status": "awaiting_approval"},
		},
		{
			name: "awaiting approval without a suggestion",
			res: invoke.ToolResult{CallID: "c6", Status: models.StatusAwaitingApproval,
				Error: &invoke.ToolError{Code: "CONFIRMATION_REQUIRED", Message: "x needs a reviewer's approval for this call", Retryable: true}},
			isError: true,
			text:    []string{"The call c6 waits for a human reviewer", `Tell the user, then check later with call_result {"call_id": "c6"}.`, `"wait_seconds": 50}.`},
		},
		{
			name:    "failed without an error",
			res:     invoke.ToolResult{CallID: "c9", Status: models.StatusInterrupted},
			isError: true, text: []string{"INTERNAL: the call ended interrupted without an error."},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := Result(tc.res)
			if out.IsError != tc.isError {
				t.Errorf("isError %v, want %v", out.IsError, tc.isError)
			}
			if len(out.Content) != 1 {
				t.Fatalf("%d contents", len(out.Content))
			}
			text := out.Content[0].(*mcp.TextContent).Text
			rest := text
			for _, want := range tc.text {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Fatalf("text %q lacks %q (in order)", text, want)
				}
				rest = rest[i+len(want):]
			}
			if (out.StructuredContent != nil) != tc.structured {
				t.Errorf("structuredContent %v, want present %v", out.StructuredContent, tc.structured)
			}
			for k, v := range tc.meta {
				if out.Meta[k] != v {
					t.Errorf("meta %s = %v, want %s", k, out.Meta[k], v)
				}
			}
		})
	}
}

// TestDirections: the invoker's suggestions to an MCP client name this
// server's tools, so no REST endpoint reaches the model.
func TestDirections(t *testing.T) {
	d := models.DirectionsOf(models.WithDirections(context.Background(), directions{}))
	if got := d.SearchTools(); got != SearchToolsName {
		t.Errorf("SearchTools() = %q", got)
	}
	if got, want := d.PollCall("c8"), `Check later with call_result {"call_id": "c8"}`; got != want {
		t.Errorf("PollCall() = %q, want %q", got, want)
	}
}

func TestSessionName(t *testing.T) {
	cases := map[string]string{
		"":                           "",
		"KT5JBEPFKUCOSMUAZV3YEVAVEW": "mcp-KT5JBEPFKUCOSMUAZV3YEVAVEW",
		"a b/../c\x00":               "mcp-ab..c",
		"/ ":                         "",
		strings.Repeat("x", 300):     "mcp-" + strings.Repeat("x", 124),
	}
	valid := regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)
	for in, want := range cases {
		got := sessionName(in)
		if got != want || (got != "" && !valid.MatchString(got)) {
			t.Errorf("sessionName(%q) = %q, want %q", in, got, want)
		}
	}
	if sessionID(nil) != "" {
		t.Error("no session must leave the per-principal default")
	}
}

// TestCompleted: a result marked complete says so on the wire and keeps
// every field as it was, numbers past float64's exact range too.
func TestCompleted(t *testing.T) {
	data := json.RawMessage(`{"id":9007199254740993,"big":123456789012345678901234}`)
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(data)}}, StructuredContent: data,
		Meta: mcp.Meta{"toolbelt/call_id": "c1"}, IsError: true}
	raw, err := json.Marshal(completed(res))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"resultType":"complete"`, `"structuredContent":{"id":9007199254740993,"big":123456789012345678901234}`,
		`"toolbelt/call_id":"c1"`, `"isError":true`, `"text":"{\"id\":9007199254740993`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("%s lacks %s", raw, want)
		}
	}
	if raw, _ := json.Marshal(completed(&mcp.CallToolResult{})); !strings.Contains(string(raw), `"content":[]`) {
		t.Errorf("no content: %s", raw)
	}
}

// TestProgressNumbers: a tool's progress reaches the client as the tool
// counted it, total with it, and keeps rising when a retry counts again.
func TestProgressNumbers(t *testing.T) {
	var n progressNumbers
	for i, step := range []struct {
		in              map[string]any
		progress, total float64
	}{
		{map[string]any{"progress": 1.0, "total": 4.0}, 1, 4},
		{map[string]any{"progress": 2.0, "total": 4.0}, 2, 4},
		{map[string]any{"progress": 1.0, "total": 4.0}, 4, 7}, // a retry starts again
		{map[string]any{"progress": 4.0, "total": 4.0}, 7, 7},
		{map[string]any{"message": "no number"}, 8, 0},
		{nil, 9, 0},
	} {
		p, total := n.next(step.in)
		if p != step.progress || total != step.total {
			t.Errorf("step %d %v: %g of %g, want %g of %g", i, step.in, p, total, step.progress, step.total)
		}
	}
}
