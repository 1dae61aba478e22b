package selection

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"toolbelt/models"
	"toolbelt/services/embed"
)

// Agents send what they have: a system prompt followed by the user's
// request, or a whole conversation. A task is ranked on its focus — the
// latest user request — with the rest weighed as context, each within
// what an embedding model reads at once. No task is refused for its length
// (the request body limit bounds it); what lies past these budgets is not
// read.
const (
	// FocusChars bounds the focus: the end of the latest user request
	// (its last paragraphs), at most this many characters.
	FocusChars = 2000
	// ContextChars bounds the context: the most recent other text, at
	// most this many characters.
	ContextChars = 4000
	// contextWeight is the context's weight against the focus's 1, both
	// in the lexical and in the dense signal.
	contextWeight = 0.3
	// MaxMessages bounds a request's messages.
	MaxMessages = 1000
)

// Message is one message of a conversation in the chat format of the LLM
// APIs: a role and its content, a string or a list of parts of which the
// text parts are read.
type Message struct {
	Role    string          `json:"role" example:"user" enums:"system,developer,user,assistant,tool"`
	Content json.RawMessage `json:"content" swaggertype:"string" example:"List the CSV files in ./data"`
}

// messageRoles are the roles read; tool results and function calls are
// context like any other text.
var messageRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

// task is a selection request's text as it is ranked.
type task struct {
	focus   string // ranked at full weight; recorded and learned from
	context string // weighed at contextWeight
}

// taskOf composes the task from the request's query and messages. The
// focus is the query when there is one (the messages are then all
// context), else the last user message; a focus longer than FocusChars
// keeps its last paragraphs, and what it leaves joins the context. The
// context is the most recent text first, cut at ContextChars.
func taskOf(query string, msgs []Message) (task, models.Problems) {
	var ps models.Problems
	texts := make([]string, len(msgs))
	lastUser := -1
	for i, m := range msgs {
		at := fmt.Sprintf("/messages/%d", i)
		if !messageRoles[m.Role] {
			ps.Add(at+"/role", "%q is not a role; use system, developer, user, assistant or tool", m.Role)
		}
		text, err := messageText(m.Content)
		if err != nil {
			ps.Add(at+"/content", "%s", err)
		}
		texts[i] = strings.TrimSpace(text)
		if m.Role == "user" && texts[i] != "" {
			lastUser = i
		}
	}
	if len(msgs) > MaxMessages {
		ps.Add("/messages", "has %d messages; at most %d are read", len(msgs), MaxMessages)
	}
	if len(ps) > 0 {
		return task{}, ps
	}
	focus := query
	if focus == "" && lastUser >= 0 {
		focus, texts[lastUser] = texts[lastUser], ""
	}
	if focus == "" {
		if len(msgs) == 0 {
			ps.Add("/query", "is required: describe the task the tools are for, or send the conversation as messages")
		} else {
			ps.Add("/messages", "has no user message with text: send the task as query or as a user message")
		}
		return task{}, ps
	}
	focus, rest := splitFocus(focus)
	// The context, most recent first: what the focus left, then the
	// messages from the last to the first.
	var more strings.Builder
	add := func(s string) {
		if s == "" || more.Len() >= ContextChars {
			return
		}
		if more.Len() > 0 {
			more.WriteString("\n")
		}
		more.WriteString(tail(s, ContextChars-more.Len()))
	}
	add(rest)
	for i := len(texts) - 1; i >= 0; i-- {
		add(texts[i])
	}
	return task{focus: focus, context: more.String()}, nil
}

// mixVectors is the unit vector of focus + weight × context, or focus
// alone without a context vector of its length.
func mixVectors(focus, context []float32, weight float32) []float32 {
	if len(context) != len(focus) {
		return focus
	}
	out := make([]float32, len(focus))
	for i := range focus {
		out[i] = focus[i] + weight*context[i]
	}
	return embed.Normalize(out)
}

// messageText is the text of a message's content: a string, or the text
// parts of a list of parts ({"type": "text", "text": …}); other parts
// (images, files) carry no text.
func messageText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("must be a string or a list of parts such as {\"type\": \"text\", \"text\": \"…\"}")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Text != "" {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// splitFocus keeps the end of a long text as the focus: whole paragraphs
// from the last, while they fit in FocusChars (the end of the last one
// when it alone does not). A system prompt followed by the request so
// leaves the request as the focus. rest is what comes before.
func splitFocus(text string) (focus, rest string) {
	if utf8.RuneCountInString(text) <= FocusChars {
		return text, ""
	}
	paras := strings.Split(text, "\n\n")
	start := len(paras)
	n := 0
	for start > 0 {
		p := strings.TrimSpace(paras[start-1])
		if n+utf8.RuneCountInString(p) > FocusChars {
			break
		}
		n += utf8.RuneCountInString(p) + 2
		start--
	}
	if start == len(paras) { // the last paragraph alone is too long
		return strings.TrimSpace(tail(text, FocusChars)), strings.TrimSpace(head(text, utf8.RuneCountInString(text)-FocusChars))
	}
	return strings.TrimSpace(strings.Join(paras[start:], "\n\n")), strings.TrimSpace(strings.Join(paras[:start], "\n\n"))
}

// tail is the last n runes of s, head its first n.
func tail(s string, n int) string {
	if c := utf8.RuneCountInString(s); c > n {
		for i := range s {
			if c <= n {
				return s[i:]
			}
			c--
		}
	}
	return s
}

func head(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}
