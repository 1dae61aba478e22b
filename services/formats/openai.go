package formats

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"toolbelt/services/tooldef"
)

// The tool shapes of each API. Struct fields keep the order the APIs
// document; schemas are maps, whose keys encoding/json sorts.
type (
	openAITool struct {
		Type     string         `json:"type"`
		Function openAIFunction `json:"function"`
	}
	openAIFunction struct {
		Name        string         `json:"name"`
		Description string         `json:"description,omitempty"`
		Parameters  map[string]any `json:"parameters"`
		Strict      bool           `json:"strict,omitempty"` // absent unless the schema qualifies
	}
	responsesTool struct {
		Type        string         `json:"type"`
		Name        string         `json:"name"`
		Description string         `json:"description,omitempty"`
		Parameters  map[string]any `json:"parameters"`
		Strict      bool           `json:"strict"` // explicit: the Responses API defaults to true
	}
)

// newOpenAITool is a Chat Completions tool.
func newOpenAITool(name, desc string, schema map[string]any) openAITool {
	params, strict := openAIParameters(schema)
	return openAITool{Type: "function", Function: openAIFunction{
		Name: name, Description: desc, Parameters: params, Strict: strict,
	}}
}

// newResponsesTool is a Responses API tool.
func newResponsesTool(name, desc string, schema map[string]any) responsesTool {
	params, strict := openAIParameters(schema)
	return responsesTool{
		Type: "function", Name: name, Description: desc, Parameters: params, Strict: strict,
	}
}

// openAIParameters is the parameters schema for OpenAI, and whether it is
// strict: the strict form when OpenAI's strict mode accepts it, else the
// schema as written (with a plain root).
func openAIParameters(schema map[string]any) (map[string]any, bool) {
	params := plainRoot(withoutDialect(withoutBooleanItems(schema)))
	if sf, _ := strictForm(params).(map[string]any); qualifiesStrict(sf) {
		return sf, true
	}
	return params, false
}

// strictForm is the schema as OpenAI documents for strict mode: every
// object with properties lists them all in required and is closed
// (additionalProperties: false), an optional property made nullable, so
// the model sends null for what it leaves out (a call treats such a null as
// absent: see invoke's validate). Objects without properties, or open on
// purpose, are left as they are (and keep the schema from strict). It
// never modifies schema; $defs are left as written.
func strictForm(v any) any {
	s, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := maps.Clone(s)
	addNotes(out, dropForStrict(out)...)
	if items, ok := out["items"]; ok {
		out["items"] = strictForm(items)
	}
	if branches, ok := out["anyOf"].([]any); ok {
		list := make([]any, len(branches))
		for i, b := range branches {
			list[i] = strictForm(b)
		}
		out["anyOf"] = list
	}
	props, ok := out["properties"].(map[string]any)
	if !ok || len(props) == 0 {
		return out
	}
	if ap, has := out["additionalProperties"]; has && ap != false {
		return out
	}
	required := stringList(out["required"])
	names := slices.Sorted(maps.Keys(props))
	closed := make(map[string]any, len(props))
	for _, name := range names {
		p := strictForm(props[name])
		if !slices.Contains(required, name) {
			p = nullable(p)
		}
		closed[name] = p
	}
	out["properties"] = closed
	out["required"] = toAnyList(names)
	out["additionalProperties"] = false
	return out
}

// strictDroppable are constraints strict mode does not take that OpenAI
// documents may be left out: each is dropped from the strict rendering and
// stated in the description instead (the server still enforces it, since
// calls are validated against the schema as registered).
var strictDroppable = []struct {
	key  string
	note func(v any) string
}{
	{"minLength", func(v any) string { return fmt.Sprintf("At least %s characters.", jsonText(v)) }},
	{"maxLength", func(v any) string { return fmt.Sprintf("At most %s characters.", jsonText(v)) }},
	{"default", func(v any) string { return fmt.Sprintf("Default: %s.", jsonText(v)) }},
	{"examples", func(v any) string {
		if list, ok := v.([]any); ok && len(list) > 0 {
			return fmt.Sprintf("Example: %s.", jsonText(list[0]))
		}
		return ""
	}},
	{"minProperties", func(v any) string { return fmt.Sprintf("At least %s fields.", jsonText(v)) }},
	{"maxProperties", func(v any) string { return fmt.Sprintf("At most %s fields.", jsonText(v)) }},
	{"uniqueItems", func(v any) string {
		if v == true {
			return "Items must be unique."
		}
		return ""
	}},
}

// dropForStrict removes from s, in place, the constraints strict mode
// does not take but that may be stated instead, and returns the notes.
func dropForStrict(s map[string]any) []string {
	var notes []string
	if f, ok := s["format"].(string); ok && !strictFormats[f] {
		delete(s, "format")
		notes = append(notes, fmt.Sprintf("Format: %s.", f))
	}
	for _, d := range strictDroppable {
		v, ok := s[d.key]
		if !ok {
			continue
		}
		delete(s, d.key)
		if n := d.note(v); n != "" {
			notes = append(notes, n)
		}
	}
	return notes
}

// nullable is a property schema that also accepts null.
func nullable(v any) any {
	s, ok := v.(map[string]any)
	if !ok || tooldef.AcceptsNull(s) {
		return v
	}
	out := maps.Clone(s)
	switch t := s["type"].(type) {
	case string:
		out["type"] = []any{t, "null"}
	case []any:
		out["type"] = append(slices.Clone(t), "null")
	default: // a $ref, an anyOf or an untyped schema
		return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
	}
	if e, ok := s["enum"].([]any); ok {
		out["enum"] = append(slices.Clone(e), nil)
	}
	if c, ok := s["const"]; ok {
		delete(out, "const")
		out["enum"] = []any{c, nil}
	}
	return out
}

// strictKeywords are the JSON Schema keywords OpenAI's strict mode accepts;
// any other keyword makes the API reject a strict tool, so it disqualifies
// the schema.
var strictKeywords = map[string]bool{
	"type": true, "description": true, "title": true,
	"properties": true, "required": true, "additionalProperties": true,
	"items": true, "minItems": true, "maxItems": true,
	"anyOf": true, "enum": true, "const": true,
	"$ref": true, "$defs": true, "definitions": true,
	"pattern": true, "format": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
}

// strictFormats are the string formats strict mode supports.
var strictFormats = map[string]bool{
	"date-time": true, "time": true, "date": true, "duration": true, "email": true,
	"hostname": true, "ipv4": true, "ipv6": true, "uuid": true,
}

// strictTypes are the JSON types strict mode supports.
var strictTypes = map[string]bool{
	"object": true, "array": true, "string": true, "number": true, "integer": true, "boolean": true, "null": true,
}

// Size limits of strict mode, as OpenAI's Structured Outputs guide states
// them ("Supported schemas"). Each has a test at both sides of its bound
// (TestStrictLimits).
const (
	strictMaxProperties = 5000   // object properties in the whole schema
	strictMaxDepth      = 10     // levels of nesting
	strictMaxEnumValues = 1000   // enum values across all enum properties
	strictMaxChars      = 120000 // property and definition names, enum and const values
	// A single string enum of more than strictLargeEnum values may hold
	// at most strictLargeEnumChars characters in all.
	strictLargeEnum      = 250
	strictLargeEnumChars = 15000
)

// qualifiesStrict reports whether OpenAI accepts schema with strict: true.
// It errs towards false: a tool wrongly marked strict fails the whole
// request, while a tool left non-strict only loses the guarantee.
func qualifiesStrict(schema map[string]any) bool {
	if schema["type"] != "object" {
		return false
	}
	if _, ok := schema["anyOf"]; ok {
		return false
	}
	var w strictWalker
	return w.check(schema, 0) &&
		w.properties <= strictMaxProperties && w.enumValues <= strictMaxEnumValues && w.chars <= strictMaxChars
}

type strictWalker struct {
	properties, enumValues, chars int
}

func (w *strictWalker) check(v any, depth int) bool {
	s, ok := v.(map[string]any)
	if !ok || depth > strictMaxDepth {
		return false
	}
	for k := range s {
		if !strictKeywords[k] {
			return false
		}
	}
	if ref, ok := s["$ref"]; ok {
		// OpenAI cannot combine a reference with sibling keywords.
		r, _ := ref.(string)
		return len(s) == 1 && strings.HasPrefix(r, "#")
	}
	types, ok := typeList(s["type"])
	if !ok {
		return false
	}
	for _, t := range types {
		if !strictTypes[t] {
			return false
		}
	}
	branches, hasAnyOf := s["anyOf"]
	if len(types) == 0 && !hasAnyOf {
		return false
	}
	if hasAnyOf {
		list, ok := branches.([]any)
		if !ok || len(list) == 0 {
			return false
		}
		for _, b := range list {
			if !w.check(b, depth) {
				return false
			}
		}
	}
	_, hasProps := s["properties"]
	if slices.Contains(types, "object") || hasProps {
		if !w.checkObject(s, depth) {
			return false
		}
	}
	if items, ok := s["items"]; ok {
		if !w.check(items, depth+1) {
			return false
		}
	} else if slices.Contains(types, "array") {
		return false
	}
	for _, key := range []string{"$defs", "definitions"} {
		if defs, ok := s[key]; ok {
			m, ok := defs.(map[string]any)
			if !ok {
				return false
			}
			for name, d := range m {
				w.chars += len(name)
				if !w.check(d, depth) {
					return false
				}
			}
		}
	}
	if f, ok := s["format"]; ok {
		if fs, _ := f.(string); !strictFormats[fs] {
			return false
		}
	}
	if e, ok := s["enum"]; ok {
		list, ok := e.([]any)
		if !ok {
			return false
		}
		w.enumValues += len(list)
		strChars := 0
		for _, v := range list {
			w.chars += len(jsonText(v))
			if str, ok := v.(string); ok {
				strChars += len(str)
			}
		}
		if len(list) > strictLargeEnum && strChars > strictLargeEnumChars {
			return false
		}
	}
	if c, ok := s["const"]; ok {
		w.chars += len(jsonText(c))
	}
	return true
}

// checkObject applies strict mode's object rules: no extra keys allowed and
// every property required.
func (w *strictWalker) checkObject(s map[string]any, depth int) bool {
	if s["additionalProperties"] != false {
		return false
	}
	props := map[string]any{}
	if p, ok := s["properties"]; ok {
		if props, ok = p.(map[string]any); !ok {
			return false
		}
	}
	required := map[string]bool{}
	if r, ok := s["required"]; ok {
		list, ok := r.([]any)
		if !ok {
			return false
		}
		for _, v := range list {
			name, ok := v.(string)
			if _, defined := props[name]; !ok || !defined || required[name] {
				return false
			}
			required[name] = true
		}
	}
	if len(required) != len(props) {
		return false
	}
	w.properties += len(props)
	for name, p := range props {
		w.chars += len(name)
		if !w.check(p, depth+1) {
			return false
		}
	}
	return true
}
