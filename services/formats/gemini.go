package formats

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"net/url"
	"slices"
	"strings"
)

// geminiFunction is a FunctionDeclaration with its parameters in
// parametersJsonSchema, the field @google/genai's README declares a
// function with: it takes JSON Schema as JSON carries it, where
// "parameters" is the SDK's Schema, whose Type enum and string-typed
// counts no plain JSON matches.
type geminiFunction struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// ParametersJSONSchema is left out for a tool without parameters,
	// as the API allows: it refused an OBJECT with no properties.
	ParametersJSONSchema map[string]any `json:"parametersJsonSchema,omitempty"`
}

// newGeminiFunction is a FunctionDeclaration. A tool without properties
// gets no parameters, and what the conversion noted about its schema joins
// the description.
func newGeminiFunction(name, desc string, schema map[string]any) geminiFunction {
	params := geminiParameters(schema)
	if props, _ := params["properties"].(map[string]any); len(props) == 0 {
		if note, _ := params["description"].(string); note != "" {
			desc = strings.TrimSpace(desc + " " + note)
		}
		params = nil
	}
	return geminiFunction{Name: name, Description: desc, ParametersJSONSchema: params}
}

// geminiFormats are the formats Gemini accepts per type; it rejects the
// request for any other, so others are dropped and named in the description.
var geminiFormats = map[string][]string{
	"string":  {"date-time", "enum"},
	"number":  {"float", "double"},
	"integer": {"int32", "int64"},
}

// annotationKeywords say nothing about which values are valid. A schema made
// only of these is a pure annotation and merges without changing types.
var annotationKeywords = map[string]bool{
	"title": true, "description": true, "default": true, "examples": true, "example": true,
	"$comment": true, "$schema": true, "$id": true, "$anchor": true, "$defs": true, "definitions": true,
	"deprecated": true, "readOnly": true, "writeOnly": true, "nullable": true,
}

// typeKeywords are the keywords that apply to each JSON type, used to split
// a schema with several types into one anyOf branch per type.
var typeKeywords = map[string][]string{
	"string":  {"minLength", "maxLength", "pattern", "format", "enum", "const"},
	"number":  {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "format", "enum", "const"},
	"integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "format", "enum", "const"},
	"boolean": {"enum", "const"},
	"array":   {"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains", "enum", "const"},
	"object": {"properties", "required", "additionalProperties", "patternProperties", "minProperties",
		"maxProperties", "propertyOrdering", "dependentRequired", "enum", "const"},
}

// Keywords that imply a type when a schema has no "type".
var (
	objectHints = []string{"properties", "required", "additionalProperties", "patternProperties", "minProperties", "maxProperties", "dependentRequired"}
	arrayHints  = []string{"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains"}
	stringHints = []string{"minLength", "maxLength", "pattern"}
	numberHints = []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)

// Bounds on the converted schema, which inlining can make far larger than
// its source; past them a subschema becomes a plain object.
const (
	geminiMaxDepth = 32
	geminiMaxNodes = 20000
)

// geminiParameters converts a JSON Schema to the subset Gemini documents
// for a function's parameters, written as JSON Schema for
// parametersJsonSchema: type (one, or one and "null"), format, title,
// description, enum, items, minItems, maxItems, properties, required,
// minProperties, maxProperties, minLength, maxLength, pattern, minimum,
// maximum, anyOf, default, propertyOrdering and examples. What Gemini cannot
// express becomes the closest shape it can, and a constraint that is lost is
// written into the description so the model still sees it. The converter
// works in Gemini's Schema terms (nullable, example); jsonSchemaForm turns
// them into JSON Schema last.
func geminiParameters(schema map[string]any) map[string]any {
	c := geminiConverter{root: schema, stack: []string{"#"}} // the root is being converted
	out := c.convert(schema, 0)
	out["type"] = "object" // the root is validated to be an object
	delete(out, "nullable")
	jsonTextObjects(out, true)
	jsonSchemaForm(out)
	return out
}

// jsonSchemaForm rewrites, in place, the Schema-only keywords of a
// converted schema as JSON Schema states them: nullable becomes "null"
// among the types (and in the enum, which would refuse null otherwise),
// example becomes examples, and the "enum" format, which only marks an
// enum in Gemini's Schema, goes.
func jsonSchemaForm(s map[string]any) {
	if props, ok := s["properties"].(map[string]any); ok {
		for _, p := range props {
			jsonSchemaForm(p.(map[string]any))
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		jsonSchemaForm(items)
	}
	if list, ok := s["anyOf"].([]any); ok {
		for _, b := range list {
			jsonSchemaForm(b.(map[string]any))
		}
	}
	if n, _ := s["nullable"].(bool); n {
		if t, ok := s["type"].(string); ok {
			s["type"] = []any{t, "null"}
			if e, ok := s["enum"].([]any); ok {
				s["enum"] = append(slices.Clone(e), nil)
			}
		}
	}
	delete(s, "nullable")
	if v, ok := s["example"]; ok {
		delete(s, "example")
		s["examples"] = []any{v}
	}
	if s["format"] == "enum" {
		delete(s, "format")
	}
}

// geminiJSONTextNote tells the model how a free-form object is written.
const geminiJSONTextNote = `A JSON object, written as a string of JSON text (for example "{\"key\": \"value\"}").`

// jsonTextObjects rewrites, in place, every OBJECT without properties
// in s but the root (a free-form object, a recursive or too-large placeholder) as a
// string holding the object as JSON text: Gemini's Schema refuses an OBJECT
// with no properties ("properties: should be non-empty for OBJECT type"),
// and the rendering keeps to what that Schema takes, so it holds wherever
// a client puts it. A
// call turns such a string back into the object where the tool's schema
// takes an object and no string (tooldef.ArgsPlan), so the tool sees what
// its schema describes.
func jsonTextObjects(s map[string]any, root bool) {
	if props, ok := s["properties"].(map[string]any); ok {
		for _, p := range props {
			jsonTextObjects(p.(map[string]any), false)
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		jsonTextObjects(items, false)
	}
	if list, ok := s["anyOf"].([]any); ok {
		for _, b := range list {
			jsonTextObjects(b.(map[string]any), root)
		}
	}
	// The root stays an object: a tool's arguments are one, and one
	// without properties is rendered with no parameters at all.
	if root || s["type"] != "object" || s["properties"] != nil {
		return
	}
	var notes []string
	for _, k := range []string{"minProperties", "maxProperties"} {
		if n, ok := s[k]; ok {
			notes = append(notes, fmt.Sprintf("%s: %v.", k, n))
		}
	}
	if d, ok := s["default"]; ok {
		notes = append(notes, "Default: "+jsonText(d)+".")
	}
	for _, k := range []string{"minProperties", "maxProperties", "default", "example"} {
		delete(s, k)
	}
	s["type"] = "string"
	addNotes(s, append([]string{geminiJSONTextNote}, notes...)...)
}

type geminiConverter struct {
	root  map[string]any
	stack []string // $refs being inlined, innermost last
	nodes int      // subschemas converted so far
}

// convert returns the Gemini form of the subschema v. It never modifies v.
func (c *geminiConverter) convert(v any, depth int) map[string]any {
	s, ok := v.(map[string]any)
	if !ok { // a boolean schema: true accepts anything
		return geminiAny(false)
	}
	c.nodes++
	if depth > geminiMaxDepth || c.nodes > geminiMaxNodes {
		out := map[string]any{"type": "object"}
		addNotes(out, "Too large to describe here.")
		return out
	}
	if ref, ok := s["$ref"].(string); ok {
		return c.inline(s, ref, depth)
	}
	if parts, ok := s["allOf"].([]any); ok && len(parts) > 0 {
		return c.allOf(s, parts, depth)
	}
	if _, ok := s["anyOf"].([]any); ok {
		return c.union(s, "anyOf", depth)
	}
	if _, ok := s["oneOf"].([]any); ok {
		return c.union(s, "oneOf", depth)
	}

	types, nullable, _ := splitNull(s["type"])
	if len(types) == 0 {
		inferred, null := inferTypes(s)
		types, nullable = inferred, nullable || null
	}
	if n, _ := s["nullable"].(bool); n {
		nullable = true
	}
	switch len(types) {
	case 0:
		out := geminiAny(nullable)
		copyAnnotations(s, out)
		return out
	case 1:
		return c.typed(s, types[0], nullable, depth)
	}
	// Several types: one anyOf branch per type, each with the keywords that
	// apply to it.
	var branches []map[string]any
	for _, t := range types {
		branch := map[string]any{"type": t}
		for _, k := range typeKeywords[t] {
			if v, ok := s[k]; ok {
				branch[k] = v
			}
		}
		if !filterValues(branch, t) {
			continue // no enum value of this type: the branch matches nothing
		}
		branches = append(branches, c.typed(branch, t, nullable, depth))
	}
	out := unionOf(branches, nullable)
	copyAnnotations(s, out)
	return out
}

// inline replaces a $ref by the schema it points to, with the sibling
// keywords of the reference taking precedence. A reference already being
// inlined is recursive: Gemini cannot express recursion, so it becomes a
// placeholder saying so.
func (c *geminiConverter) inline(s map[string]any, ref string, depth int) map[string]any {
	rest := without(s, "$ref")
	target, ok := c.resolve(ref)
	if !ok {
		out := c.convert(rest, depth)
		addNotes(out, fmt.Sprintf("Follows the schema %s.", ref))
		return out
	}
	if slices.Contains(c.stack, ref) {
		return recursivePlaceholder(rest, target, ref)
	}
	merged := maps.Clone(target)
	maps.Copy(merged, rest)
	c.stack = append(c.stack, ref)
	defer func() { c.stack = c.stack[:len(c.stack)-1] }()
	return c.convert(merged, depth)
}

// resolve looks up a reference inside the root schema ("#", "#/$defs/X",
// "#/definitions/X" or any other local JSON pointer).
func (c *geminiConverter) resolve(ref string) (map[string]any, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	frag, err := url.PathUnescape(frag)
	if err != nil || (frag != "" && !strings.HasPrefix(frag, "/")) {
		return nil, false
	}
	var cur any = c.root
	if frag != "" {
		for _, tok := range strings.Split(frag[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[tok]; !ok {
				return nil, false
			}
		}
	}
	m, ok := cur.(map[string]any)
	return m, ok
}

func recursivePlaceholder(rest, target map[string]any, ref string) map[string]any {
	out := map[string]any{"type": "object"}
	if t, ok := target["type"].(string); ok && t != "null" {
		out["type"] = t
		if t == "array" {
			out["items"] = map[string]any{"type": "object"}
		}
	}
	for _, s := range []map[string]any{target, rest} {
		if d, ok := s["description"].(string); ok && d != "" {
			out["description"] = d
		}
	}
	name := "the whole input"
	if i := strings.LastIndex(ref, "/"); i >= 0 {
		name = ref[i+1:]
	}
	addNotes(out, fmt.Sprintf("Recursive: has the same structure as %s.", name))
	return out
}

// allOf merges the parts of an allOf: parts of one type (typically objects)
// merge into one schema with properties and required unioned; otherwise the
// first part stands for all of them.
func (c *geminiConverter) allOf(s map[string]any, parts []any, depth int) map[string]any {
	rest := without(s, "allOf")
	var converted []map[string]any
	if hasAssertions(rest) {
		converted = append(converted, c.convert(rest, depth))
	}
	for _, p := range parts {
		converted = append(converted, c.convert(p, depth+1))
	}
	out := converted[0]
	t, _ := out["type"].(string)
	same := t != ""
	for _, p := range converted[1:] {
		same = same && p["type"] == t
	}
	if same {
		// A part may require a property another part defines, which its
		// own conversion dropped: take required from the sources too.
		var required []any
		for _, p := range append([]any{rest}, parts...) {
			if m, ok := p.(map[string]any); ok {
				r, _ := m["required"].([]any)
				required = append(required, r...)
			}
		}
		out = mergeConverted(converted, required)
	}
	if !hasAssertions(rest) {
		overlayAnnotations(rest, out)
	}
	return out
}

// mergeConverted merges Gemini schemas of one type: properties and required
// (with extraRequired) are unioned, keeping only defined names; for other
// fields the first part that sets one wins.
func mergeConverted(parts []map[string]any, extraRequired []any) map[string]any {
	out := maps.Clone(parts[0])
	props := map[string]any{}
	var required []any
	for _, p := range parts {
		if pp, ok := p["properties"].(map[string]any); ok {
			for name, v := range pp {
				if _, seen := props[name]; !seen {
					props[name] = v
				}
			}
		}
		if r, ok := p["required"].([]any); ok {
			for _, name := range r {
				if !slices.Contains(required, name) {
					required = append(required, name)
				}
			}
		}
		for k, v := range p {
			if _, set := out[k]; !set {
				out[k] = v
			}
		}
	}
	delete(out, "required")
	required = append(required, extraRequired...)
	if len(props) > 0 {
		out["properties"] = props
	}
	if req := onlyDefined(required, props); len(req) > 0 {
		out["required"] = req
	}
	if order, ok := out["propertyOrdering"].([]any); ok {
		out["propertyOrdering"] = onlyDefined(order, props)
	}
	return out
}

// union converts anyOf and oneOf (both become anyOf). Null branches become
// nullable. Branches beside other assertions are combined with them, except
// that object branches naming only required properties (the usual "give a or
// b" rule) become a sentence in the description.
func (c *geminiConverter) union(s map[string]any, key string, depth int) map[string]any {
	rest := without(s, "anyOf", "oneOf")
	list := s[key].([]any)
	nullable, _ := s["nullable"].(bool)
	var live []any
	for _, b := range list {
		if isNullSchema(b) {
			nullable = true
		} else {
			live = append(live, b)
		}
	}
	if hasAssertions(rest) {
		if isObjectSchema(rest) && requiredOnly(live) {
			out := c.convert(rest, depth)
			addNotes(out, requiredAlternatives(key, live))
			return out
		}
		base := maps.Clone(rest)
		maps.DeleteFunc(base, func(k string, _ any) bool { return annotationKeywords[k] })
		combined := make([]any, len(live))
		for i, b := range live {
			combined[i] = combine(base, b)
		}
		live = combined
	}
	branches := make([]map[string]any, 0, len(live))
	for _, b := range live {
		branches = append(branches, c.convert(b, depth+1))
	}
	out := unionOf(branches, nullable)
	overlayAnnotations(rest, out)
	return out
}

// typed converts a schema known to have the single type t.
func (c *geminiConverter) typed(s map[string]any, t string, nullable bool, depth int) map[string]any {
	out := map[string]any{"type": t}
	if nullable {
		out["nullable"] = true
	}
	copyAnnotations(s, out)
	var notes []string

	if v, ok := s["const"]; ok {
		if str, ok := v.(string); ok && t == "string" {
			out["enum"] = []any{str}
		} else if v != nil {
			notes = append(notes, "Must be "+jsonText(v)+".")
		}
	} else if list, ok := s["enum"].([]any); ok {
		var strs, others []any
		for _, v := range list {
			switch v := v.(type) {
			case string:
				strs = append(strs, v)
			case nil: // null is allowed through nullable, not enum
			default:
				others = append(others, v)
			}
		}
		switch {
		case t == "string" && len(strs) > 0:
			// Values of other types can never match a string.
			out["enum"] = strs
		case t != "string" && len(others) > 0:
			// Gemini takes only string enums; turning 1 into "1" would make
			// the model send strings the original schema rejects.
			notes = append(notes, "Allowed values: "+joinJSON(others)+".")
		}
	}

	if f, ok := s["format"].(string); ok {
		switch {
		case f == "enum" && out["enum"] == nil:
		case slices.Contains(geminiFormats[t], f):
			out["format"] = f
		default:
			notes = append(notes, "Format: "+f+".")
		}
	}

	switch t {
	case "string":
		copyKeys(s, out, "minLength", "maxLength", "pattern")
	case "number", "integer":
		copyKeys(s, out, "minimum", "maximum")
		notes = append(notes, exclusiveBound(s, out, t, "exclusiveMinimum", "minimum")...)
		notes = append(notes, exclusiveBound(s, out, t, "exclusiveMaximum", "maximum")...)
		if m, ok := s["multipleOf"].(json.Number); ok {
			notes = append(notes, "Must be a multiple of "+string(m)+".")
		}
	case "array":
		c.items(s, out, depth)
		copyKeys(s, out, "minItems", "maxItems")
		if u, _ := s["uniqueItems"].(bool); u {
			notes = append(notes, "Items must be unique.")
		}
	case "object":
		c.properties(s, out, depth)
		copyKeys(s, out, "minProperties", "maxProperties")
		if depth > 0 { // a tool's arguments are closed as a rule: no note
			notes = append(notes, additionalNote(s["additionalProperties"], out["properties"] != nil))
		}
	}
	addNotes(out, slices.DeleteFunc(notes, func(n string) bool { return n == "" })...)
	return out
}

// items converts items and prefixItems. Gemini requires items on every
// array, so an array without them takes any value.
func (c *geminiConverter) items(s, out map[string]any, depth int) {
	items, hasItems := s["items"]
	prefix, _ := s["prefixItems"].([]any)
	closed := items == false
	switch {
	case len(prefix) > 0:
		branches := make([]map[string]any, 0, len(prefix)+1)
		for _, p := range prefix {
			branches = append(branches, c.convert(p, depth+1))
		}
		if hasItems && !closed {
			branches = append(branches, c.convert(items, depth+1))
		}
		if len(branches) == 1 {
			out["items"] = branches[0]
		} else {
			out["items"] = map[string]any{"anyOf": branches}
		}
		if closed {
			out["maxItems"] = json.Number(fmt.Sprint(len(prefix)))
		}
	case closed:
		out["items"] = geminiAny(false)
		out["maxItems"] = json.Number("0")
	case hasItems:
		out["items"] = c.convert(items, depth+1)
	default:
		out["items"] = geminiAny(false)
	}
}

// properties converts properties, required and propertyOrdering, keeping
// only names that still exist.
func (c *geminiConverter) properties(s, out map[string]any, depth int) {
	props := map[string]any{}
	if in, ok := s["properties"].(map[string]any); ok {
		for name, p := range in {
			if p == false { // a property that must be absent
				continue
			}
			props[name] = c.convert(p, depth+1)
		}
	}
	if len(props) > 0 {
		out["properties"] = props
	}
	if r, ok := s["required"].([]any); ok {
		if req := onlyDefined(r, props); len(req) > 0 {
			out["required"] = req
		}
	}
	if o, ok := s["propertyOrdering"].([]any); ok {
		if order := onlyDefined(o, props); len(order) > 0 {
			out["propertyOrdering"] = order
		}
	}
}

// exclusiveBound maps exclusiveMinimum or exclusiveMaximum onto minimum or
// maximum. For integers the bound moves to the next integer and stays exact;
// for numbers the inclusive bound is looser, so a note keeps the rule.
func exclusiveBound(s, out map[string]any, t, key, inclusive string) []string {
	n, ok := s[key].(json.Number)
	if !ok {
		return nil
	}
	bound, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return nil
	}
	lower := inclusive == "minimum"
	value, exact := n, false
	if t == "integer" {
		// floor(b)+1 for a lower bound, ceil(b)-1 for an upper one.
		q := new(big.Int).Div(bound.Num(), bound.Denom()) // floor, as Denom > 0
		if lower {
			q.Add(q, big.NewInt(1))
		} else if bound.IsInt() {
			q.Sub(q, big.NewInt(1))
		}
		value, exact = json.Number(q.String()), true
	}
	if cur, ok := out[inclusive].(json.Number); ok {
		curRat, ok1 := new(big.Rat).SetString(string(cur))
		valRat, ok2 := new(big.Rat).SetString(string(value))
		if ok1 && ok2 {
			if cmp := curRat.Cmp(valRat); (lower && cmp > 0) || (!lower && cmp < 0) {
				return nil // the inclusive bound is already tighter
			}
		}
	}
	out[inclusive] = value
	if exact {
		return nil
	}
	if lower {
		return []string{"Must be greater than " + string(n) + "."}
	}
	return []string{"Must be less than " + string(n) + "."}
}

// additionalNote states the additionalProperties constraint Gemini has
// no keyword for: ap is its value, named whether the object has
// properties of its own.
func additionalNote(ap any, named bool) string {
	switch {
	case ap == nil || ap == true:
		return ""
	case ap == false && named:
		return "No other properties."
	case ap == false:
		return "Must be empty."
	case named:
		return "Other properties: " + jsonText(ap) + "."
	default:
		return "Each value: " + jsonText(ap) + "."
	}
}

// geminiAny is the schema for any value. Gemini needs a type or anyOf on
// every schema, so it lists the scalar JSON types: an array would need
// items of its own and an object properties, and an object written as
// JSON text would reach the tool as the string it also accepts.
func geminiAny(nullable bool) map[string]any {
	var branches []map[string]any
	for _, t := range []string{"string", "number", "boolean"} {
		branches = append(branches, map[string]any{"type": t})
	}
	return unionOf(branches, nullable)
}

// unionOf returns the anyOf of branches, or the single branch itself.
// nullable goes on each branch, where Gemini reads it.
func unionOf(branches []map[string]any, nullable bool) map[string]any {
	if len(branches) == 0 {
		return geminiAny(nullable)
	}
	if nullable {
		for _, b := range branches {
			setNullable(b)
		}
	}
	if len(branches) == 1 {
		return branches[0]
	}
	list := make([]any, len(branches))
	for i, b := range branches {
		list[i] = b
	}
	return map[string]any{"anyOf": list}
}

func setNullable(s map[string]any) {
	if list, ok := s["anyOf"].([]any); ok && s["type"] == nil {
		for _, b := range list {
			if m, ok := b.(map[string]any); ok {
				setNullable(m)
			}
		}
		return
	}
	s["nullable"] = true
}
