package formats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
)

// withoutDialect returns a shallow copy of the root schema without $schema
// and $id, which the LLM APIs do not need and some reject.
func withoutDialect(schema map[string]any) map[string]any {
	out := maps.Clone(schema)
	delete(out, "$schema")
	delete(out, "$id")
	return out
}

// stringList is a JSON array of strings as a []string (others skipped).
func stringList(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func toAnyList(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// marshalCompact encodes v as compact JSON without HTML escaping, so
// descriptions keep their <, > and & readable.
func marshalCompact(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// jsonText is v as compact JSON, for messages and description notes.
func jsonText(v any) string {
	raw, err := marshalCompact(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}

// typeList returns the "type" keyword as a list: nil when absent, false when
// malformed.
func typeList(v any) ([]string, bool) {
	switch t := v.(type) {
	case nil:
		return nil, true
	case string:
		return []string{t}, true
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

// addNotes appends sentences to the description, for constraints the
// target format cannot state as keywords.
func addNotes(out map[string]any, notes ...string) {
	if len(notes) == 0 {
		return
	}
	note := strings.Join(notes, " ")
	d, _ := out["description"].(string)
	switch {
	case d == "":
		out["description"] = note
	case strings.ContainsAny(d[len(d)-1:], ".!?:;"):
		out["description"] = d + " " + note
	default:
		out["description"] = d + ". " + note
	}
}
