package formats

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"
)

// splitNull splits the "type" keyword into its non-null types and whether
// null is among them.
func splitNull(v any) (types []string, nullable, ok bool) {
	list, ok := typeList(v)
	if !ok {
		return nil, false, false
	}
	for _, t := range list {
		if t == "null" {
			nullable = true
		} else if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	return types, nullable, true
}

// inferTypes guesses the types of a schema without "type" from const, enum
// or the keywords it uses, since Gemini needs a type on every schema.
func inferTypes(s map[string]any) (types []string, nullable bool) {
	var values []any
	if v, ok := s["const"]; ok {
		values = []any{v}
	} else if list, ok := s["enum"].([]any); ok {
		values = list
	}
	if values != nil {
		for _, v := range values {
			t := jsonType(v)
			switch {
			case t == "null":
				nullable = true
			case t == "integer" && slices.Contains(types, "number"):
			case t == "number" && slices.Contains(types, "integer"):
				types[slices.Index(types, "integer")] = "number"
			case !slices.Contains(types, t):
				types = append(types, t)
			}
		}
		return types, nullable
	}
	for _, hint := range []struct {
		t    string
		keys []string
	}{{"object", objectHints}, {"array", arrayHints}, {"string", stringHints}, {"number", numberHints}} {
		for _, k := range hint.keys {
			if _, ok := s[k]; ok {
				types = append(types, hint.t)
				break
			}
		}
	}
	return types, false
}

// jsonType is the JSON Schema type of a decoded value.
func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if r, ok := new(big.Rat).SetString(string(v)); ok && r.IsInt() {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	default:
		return "object"
	}
}

// filterValues keeps in enum and const only the values of type t. It
// reports false when an enum or const had values but none of type t.
func filterValues(s map[string]any, t string) bool {
	fits := func(v any) bool {
		vt := jsonType(v)
		return vt == t || (t == "number" && vt == "integer")
	}
	if v, ok := s["const"]; ok && !fits(v) {
		return false
	}
	if list, ok := s["enum"].([]any); ok {
		var kept []any
		for _, v := range list {
			if fits(v) {
				kept = append(kept, v)
			}
		}
		if len(kept) == 0 {
			return false
		}
		s["enum"] = kept
	}
	return true
}

func isNullSchema(v any) bool {
	s, ok := v.(map[string]any)
	if !ok {
		return false
	}
	if c, ok := s["const"]; ok && c == nil {
		return true
	}
	types, nullable, ok := splitNull(s["type"])
	return ok && nullable && len(types) == 0
}

func isObjectSchema(s map[string]any) bool {
	_, hasProps := s["properties"]
	return s["type"] == "object" || hasProps
}

// requiredOnly reports whether every branch only names required properties.
func requiredOnly(branches []any) bool {
	if len(branches) == 0 {
		return false
	}
	for _, b := range branches {
		s, ok := b.(map[string]any)
		if !ok {
			return false
		}
		if _, ok := s["required"].([]any); !ok {
			return false
		}
		for k, v := range s {
			if k != "required" && k != "description" && k != "title" && !(k == "type" && v == "object") {
				return false
			}
		}
	}
	return true
}

// requiredAlternatives phrases required-only union branches as a sentence.
func requiredAlternatives(key string, branches []any) string {
	alts := make([]string, 0, len(branches))
	for _, b := range branches {
		var names []string
		for _, n := range b.(map[string]any)["required"].([]any) {
			names = append(names, fmt.Sprint(n))
		}
		alts = append(alts, strings.Join(names, " and "))
	}
	how := "at least one"
	if key == "oneOf" {
		how = "exactly one"
	}
	return fmt.Sprintf("Provide %s of: %s.", how, strings.Join(alts, "; "))
}

// combine is the JSON Schema a ∧ b for a union branch b under the parent
// keywords a: properties and required are unioned, b wins elsewhere.
func combine(a map[string]any, b any) any {
	bm, ok := b.(map[string]any)
	if !ok {
		return a
	}
	out := maps.Clone(a)
	for k, v := range bm {
		switch k {
		case "properties":
			props := map[string]any{}
			if p, ok := out[k].(map[string]any); ok {
				maps.Copy(props, p)
			}
			if p, ok := v.(map[string]any); ok {
				maps.Copy(props, p)
			}
			out[k] = props
		case "required":
			var req []any
			if r, ok := out[k].([]any); ok {
				req = append(req, r...)
			}
			if r, ok := v.([]any); ok {
				for _, name := range r {
					if !slices.Contains(req, name) {
						req = append(req, name)
					}
				}
			}
			out[k] = req
		default:
			out[k] = v
		}
	}
	return out
}

func hasAssertions(s map[string]any) bool {
	for k := range s {
		if !annotationKeywords[k] {
			return true
		}
	}
	return false
}

// copyAnnotations copies the annotations Gemini understands; "examples"
// becomes "example", its first value.
func copyAnnotations(s, out map[string]any) {
	for _, k := range []string{"title", "description"} {
		if v, ok := s[k].(string); ok && strings.TrimSpace(v) != "" {
			out[k] = strings.TrimSpace(v)
		}
	}
	if v, ok := s["default"]; ok {
		out["default"] = v
	}
	if v, ok := s["example"]; ok {
		out["example"] = v
	} else if list, ok := s["examples"].([]any); ok && len(list) > 0 {
		out["example"] = list[0]
	}
}

// overlayAnnotations puts the annotations of a wrapper (a $ref, allOf or
// anyOf parent) over its converted content. The wrapper's description comes
// first; the content's own, with any notes, follows.
func overlayAnnotations(wrapper, out map[string]any) {
	inner, _ := out["description"].(string)
	copyAnnotations(wrapper, out)
	if outer, _ := out["description"].(string); inner != "" && outer != inner {
		addNotes(out, inner)
	}
}

func copyKeys(s, out map[string]any, keys ...string) {
	for _, k := range keys {
		if v, ok := s[k]; ok {
			out[k] = v
		}
	}
}

func joinJSON(values []any) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = jsonText(v)
	}
	return strings.Join(parts, ", ")
}

// onlyDefined keeps the names in list that are keys of props, once each.
func onlyDefined(list []any, props map[string]any) []any {
	var out []any
	for _, v := range list {
		name, ok := v.(string)
		if _, defined := props[name]; ok && defined && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func without(s map[string]any, keys ...string) map[string]any {
	out := maps.Clone(s)
	for _, k := range keys {
		delete(out, k)
	}
	return out
}
