package selection

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTaskOf: the focus is the query, else the last user message; a long
// focus keeps its last paragraphs and the rest joins the context, most
// recent first, within the budgets; bad messages get a problem at their
// pointer.
func TestTaskOf(t *testing.T) {
	prompt := strings.Repeat("You are a careful assistant for a data team. ", 110) // 4,950 characters
	msg := func(role, content string) Message {
		raw, _ := json.Marshal(content)
		return Message{Role: role, Content: raw}
	}
	cases := []struct {
		name              string
		query             string
		msgs              []Message
		focus, contextHas string
		contextLen        int // at most
		problems          []string
	}{
		{name: "a short query is all focus", query: "read the config file", focus: "read the config file"},
		{name: "a system prompt then the request", query: prompt + "\n\nPlease list the CSV files in ./data.",
			focus: "Please list the CSV files in ./data.", contextHas: "careful assistant", contextLen: ContextChars},
		{name: "the last user message", msgs: []Message{msg("system", "Be brief."), msg("user", "search the web for Go generics"),
			msg("assistant", "Found three articles."), msg("user", "now save the best one to a file")},
			focus: "now save the best one to a file", contextHas: "Found three articles."},
		{name: "the query before the messages", query: "send an email", msgs: []Message{msg("user", "draft it first")},
			focus: "send an email", contextHas: "draft it first"},
		{name: "content parts", msgs: []Message{{Role: "user", Content: json.RawMessage(`[{"type":"text","text":"take a screenshot"},{"type":"image_url","image_url":{"url":"x"}}]`)}},
			focus: "take a screenshot"},
		{name: "one long paragraph keeps its end", query: strings.Repeat("x", FocusChars+500) + " open the page",
			focus: strings.Repeat("x", FocusChars-len(" open the page")) + " open the page", contextLen: 514},
		{name: "nothing to rank", problems: []string{"/query"}},
		{name: "no user text", msgs: []Message{msg("assistant", "hello")}, problems: []string{"/messages"}},
		{name: "bad role and content", msgs: []Message{{Role: "robot", Content: json.RawMessage(`"x"`)}, {Role: "user", Content: json.RawMessage(`42`)}},
			problems: []string{"/messages/0/role", "/messages/1/content"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ps := taskOf(tc.query, tc.msgs)
			var ptrs []string
			for _, p := range ps {
				ptrs = append(ptrs, p.Pointer)
			}
			if strings.Join(ptrs, " ") != strings.Join(tc.problems, " ") {
				t.Fatalf("problems %v, want at %v", ps, tc.problems)
			}
			if len(ps) > 0 {
				return
			}
			if got.focus != tc.focus {
				t.Errorf("focus %.80q…, want %.80q…", got.focus, tc.focus)
			}
			if !strings.Contains(got.context, tc.contextHas) {
				t.Errorf("context %.80q… lacks %q", got.context, tc.contextHas)
			}
			if tc.contextLen > 0 && len([]rune(got.context)) > tc.contextLen {
				t.Errorf("context of %d characters, at most %d", len([]rune(got.context)), tc.contextLen)
			}
			if n := len([]rune(got.focus)); n > FocusChars {
				t.Errorf("focus of %d characters", n)
			}
		})
	}
}
