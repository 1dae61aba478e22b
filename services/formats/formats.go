// Package formats renders a tool definition as each LLM provider expects a
// tool (openai, openai_responses, anthropic, gemini) and as MCP lists one:
// the exports agents paste into their requests.
package formats

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"toolbelt/models"
	"toolbelt/services/tooldef"
)

// The LLM formats a tool can be exported in.
const (
	FormatOpenAI          = "openai"           // Chat Completions tools[]
	FormatOpenAIResponses = "openai_responses" // Responses API tools[]
	FormatAnthropic       = "anthropic"        // Messages API tools[]
	FormatGemini          = "gemini"           // a FunctionDeclaration, parameters as parametersJsonSchema
	FormatMCP             = "mcp"              // a Model Context Protocol Tool (2025-06-18)
)

// Formats lists the LLM formats a tool can be exported in.
// Revision names this renderer's output. Renderings are stored when a
// version is registered; bump it whenever a change alters what any format
// renders, and every stored version is rendered again at the next start.
//
// 2: MCP's destructiveHint for moderate tools, Gemini without parameters
// for a tool that has none, plain roots for openai and anthropic.
// 3: OpenAI's strict form (optional fields nullable, unsupported
// constraints stated in the description).
// 5: Gemini's parameters as JSON Schema in parametersJsonSchema; MCP's
// inputSchema with a plain root.
const Revision = "5"

var Formats = []string{FormatOpenAI, FormatOpenAIResponses, FormatAnthropic, FormatGemini, FormatMCP}

// Name rules of the APIs: OpenAI and Anthropic take 1-64 letters, digits,
// underscores and dashes; Gemini also wants a letter or underscore first; MCP
// allows dots and up to 128 characters.
var (
	apiNameRule    = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	geminiNameRule = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$`)
	mcpNameRule    = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)
)

// Render returns def in the named format, as the JSON object that format's
// API accepts as one tool.
func Render(def tooldef.Definition, format string) (json.RawMessage, error) {
	if !slices.Contains(Formats, format) {
		return nil, UnknownFormat(format)
	}
	schema, err := parseParameters(def)
	if err != nil {
		return nil, err
	}
	return render(def, schema, format)
}

// RenderAll renders def in every format (keys are the Formats values). The
// parameters are parsed once and shared by the renderers, which never modify
// them.
func RenderAll(def tooldef.Definition) (map[string]json.RawMessage, error) {
	schema, err := parseParameters(def)
	if err != nil {
		return nil, err
	}
	if ps := propertyNameProblems(schema, "/parameters"); len(ps) > 0 {
		return nil, &models.ValidationError{What: "tool definition", Problems: ps}
	}
	out := make(map[string]json.RawMessage, len(Formats))
	for _, format := range Formats {
		raw, err := render(def, schema, format)
		if err != nil {
			return nil, err
		}
		out[format] = raw
	}
	return out, nil
}

// propertyNameRules are the providers' rules for the names of properties
// in a tool's schema: a name outside one makes that API refuse the whole
// request, so such a definition is refused at registration instead.
var propertyNameRules = []struct {
	format, rule string
	re           *regexp.Regexp
}{
	{FormatAnthropic, `letters, digits, "_", "." and "-", 1 to 64 of them`, regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)},
	{FormatGemini, `letters, digits and "_"`, regexp.MustCompile(`^[a-zA-Z0-9_]+$`)},
}

// propertyNameProblems lists, at its pointer, every property name of the
// schema some format's rule refuses, saying which formats and why.
func propertyNameProblems(node any, ptr string) []models.Problem {
	var out []models.Problem
	switch n := node.(type) {
	case []any:
		for i, v := range n {
			out = append(out, propertyNameProblems(v, fmt.Sprintf("%s/%d", ptr, i))...)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(n)) {
			switch k {
			case "enum", "const", "default", "examples", "example", "required":
				continue // data, not schemas
			case "properties":
				props, ok := n[k].(map[string]any)
				if !ok {
					continue
				}
				for _, name := range slices.Sorted(maps.Keys(props)) {
					at := ptr + "/properties/" + tooldef.EscapePointer(name)
					var refused []string
					for _, r := range propertyNameRules {
						if !r.re.MatchString(name) {
							refused = append(refused, fmt.Sprintf("%s (%s)", r.format, r.rule))
						}
					}
					if len(refused) > 0 {
						out = append(out, models.Problem{Pointer: at, Message: fmt.Sprintf(
							"property name %q is refused by %s; rename it", name, strings.Join(refused, " and "))})
					}
					out = append(out, propertyNameProblems(props[name], at)...)
				}
				continue
			}
			out = append(out, propertyNameProblems(n[k], ptr+"/"+tooldef.EscapePointer(k))...)
		}
	}
	return out
}

func UnknownFormat(format string) error {
	return models.ErrInvalid.Errorf("unknown format %q (want one of %s)", format, strings.Join(Formats, ", "))
}

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
	anthropicTool struct {
		Name        string         `json:"name"`
		Description string         `json:"description,omitempty"`
		InputSchema map[string]any `json:"input_schema"`
	}
	// geminiFunction is a FunctionDeclaration with its parameters in
	// parametersJsonSchema, the field @google/genai's README declares a
	// function with: it takes JSON Schema as JSON carries it, where
	// "parameters" is the SDK's Schema, whose Type enum and string-typed
	// counts no plain JSON matches.
	geminiFunction struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
		// ParametersJSONSchema is left out for a tool without parameters,
		// as the API allows: it refused an OBJECT with no properties.
		ParametersJSONSchema map[string]any `json:"parametersJsonSchema,omitempty"`
	}
	mcpTool struct {
		Name        string         `json:"name"`
		Title       string         `json:"title"`
		Description string         `json:"description,omitempty"`
		InputSchema map[string]any `json:"inputSchema"`
		Annotations mcpAnnotations `json:"annotations"`
	}
	mcpAnnotations struct {
		Title           string `json:"title"`
		ReadOnlyHint    bool   `json:"readOnlyHint"`
		DestructiveHint bool   `json:"destructiveHint"`
		IdempotentHint  bool   `json:"idempotentHint"`
		OpenWorldHint   bool   `json:"openWorldHint"`
	}
)

func render(def tooldef.Definition, schema map[string]any, format string) (json.RawMessage, error) {
	if err := checkName(def.Name, format); err != nil {
		return nil, err
	}
	desc := strings.TrimSpace(def.Description)
	var tool any
	switch format {
	case FormatOpenAI:
		params, strict := openAIParameters(schema)
		tool = openAITool{Type: "function", Function: openAIFunction{
			Name: def.Name, Description: desc, Parameters: params, Strict: strict,
		}}
	case FormatOpenAIResponses:
		params, strict := openAIParameters(schema)
		tool = responsesTool{
			Type: "function", Name: def.Name, Description: desc, Parameters: params, Strict: strict,
		}
	case FormatAnthropic:
		tool = anthropicTool{Name: def.Name, Description: desc, InputSchema: plainRoot(withoutDialect(schema))}
	case FormatGemini:
		params := geminiParameters(schema)
		if props, _ := params["properties"].(map[string]any); len(props) == 0 {
			if note, _ := params["description"].(string); note != "" {
				desc = strings.TrimSpace(desc + " " + note)
			}
			params = nil
		}
		tool = geminiFunction{Name: def.Name, Description: desc, ParametersJSONSchema: params}
	case FormatMCP:
		ann, err := mcpAnnotationsFor(def)
		if err != nil {
			return nil, err
		}
		// A plain root, as for OpenAI and Anthropic: agent frameworks
		// (the Vercel AI SDK, OpenAI Agents, LangChain) pass an MCP tool's
		// inputSchema on to those APIs, which refuse root combinators, and
		// the AI SDK closes the root, which makes a root oneOf unsatisfiable.
		tool = mcpTool{Name: def.Name, Title: ann.Title, Description: desc, InputSchema: plainRoot(withoutDialect(schema)), Annotations: ann}
	default:
		return nil, UnknownFormat(format)
	}
	raw, err := marshalCompact(tool)
	if err != nil {
		return nil, fmt.Errorf("render tool %q as %s: %w", def.Name, format, err)
	}
	return raw, nil
}

func checkName(name, format string) error {
	rule := apiNameRule
	switch format {
	case FormatGemini:
		rule = geminiNameRule
	case FormatMCP:
		rule = mcpNameRule
	}
	if !rule.MatchString(name) {
		return models.ErrInvalid.Errorf("tool name %q does not fit the %s name rule %s", name, format, rule)
	}
	return nil
}

// parseParameters decodes the parameters schema, keeping numbers exact as
// json.Number. A missing schema stands for a tool without parameters.
func parseParameters(def tooldef.Definition) (map[string]any, error) {
	raw := bytes.TrimSpace(def.Parameters)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{"type": "object"}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, models.ErrInvalid.Errorf("parameters of tool %q: %v", def.Name, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, models.ErrInvalid.Errorf("parameters of tool %q: trailing data after the schema", def.Name)
	}
	schema, ok := v.(map[string]any)
	if !ok {
		return nil, models.ErrInvalid.Errorf("parameters of tool %q must be a JSON object", def.Name)
	}
	switch t := schema["type"]; t {
	case nil:
		schema["type"] = "object"
	case "object":
	default:
		return nil, models.ErrInvalid.Errorf("parameters of tool %q must have type \"object\", not %s", def.Name, jsonText(t))
	}
	return schema, nil
}

// withoutDialect returns a shallow copy of the root schema without $schema
// and $id, which the LLM APIs do not need and some reject.
func withoutDialect(schema map[string]any) map[string]any {
	out := maps.Clone(schema)
	delete(out, "$schema")
	delete(out, "$id")
	return out
}

// openAIParameters is the parameters schema for OpenAI, and whether it is
// strict: the strict form when OpenAI's strict mode accepts it, else the
// schema as written (with a plain root).
func openAIParameters(schema map[string]any) (map[string]any, bool) {
	params := plainRoot(withoutDialect(schema))
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

// rootCombinators are the keywords OpenAI (Chat Completions and Responses)
// and Anthropic refuse at the top level of a tool's parameters: each
// answers 400 for a oneOf, anyOf, allOf or not there.
var rootCombinators = []string{"allOf", "anyOf", "oneOf", "not"}

// plainRoot makes the root of parameters a plain object for the formats
// that refuse root combinators and for MCP, whose clients pass the schema
// on to them, as Gemini's rendering does: allOf parts
// that are plain objects merge into the root; the properties of anyOf and
// oneOf branches join the root's (all optional but those every branch
// requires); and what the combinators required is stated in the
// description. Calls are still validated against the whole schema, so the
// constraint holds even when the model misses the note. It never modifies
// schema.
func plainRoot(schema map[string]any) map[string]any {
	found := false
	for _, k := range rootCombinators {
		if _, ok := schema[k]; ok {
			found = true
		}
	}
	if !found {
		return schema
	}
	out := maps.Clone(schema)
	props, _ := out["properties"].(map[string]any)
	props = maps.Clone(props)
	if props == nil {
		props = map[string]any{}
	}
	required := stringList(out["required"])
	var notes []string
	addProps := func(branch map[string]any) {
		bp, _ := branch["properties"].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(bp)) {
			if _, ok := props[name]; !ok {
				props[name] = bp[name]
			}
		}
	}
	if parts, ok := out["allOf"].([]any); ok {
		delete(out, "allOf")
		for i, p := range parts {
			part, ok := p.(map[string]any)
			if !ok || !plainObjectBranch(part) {
				notes = append(notes, fmt.Sprintf("The input must also match: %s.", jsonText(parts[i])))
				continue
			}
			addProps(part)
			for _, r := range stringList(part["required"]) {
				if !slices.Contains(required, r) {
					required = append(required, r)
				}
			}
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		branches, ok := out[k].([]any)
		if !ok {
			continue
		}
		delete(out, k)
		alternatives := make([]string, 0, len(branches))
		var common []string // required by every branch
		for i, b := range branches {
			branch, ok := b.(map[string]any)
			if !ok || !plainObjectBranch(branch) {
				alternatives = append(alternatives, jsonText(b))
				common = nil
				continue
			}
			addProps(branch)
			req := stringList(branch["required"])
			if i == 0 {
				common = req
			} else {
				common = slices.DeleteFunc(common, func(r string) bool { return !slices.Contains(req, r) })
			}
			alternatives = append(alternatives, describeBranch(branch, req))
		}
		for _, r := range common {
			if !slices.Contains(required, r) {
				required = append(required, r)
			}
		}
		which := "at least one"
		if k == "oneOf" {
			which = "exactly one"
		}
		notes = append(notes, fmt.Sprintf("The input must have %s of: %s.", which, strings.Join(alternatives, "; or ")))
	}
	if not, ok := out["not"]; ok {
		delete(out, "not")
		notes = append(notes, fmt.Sprintf("The input must not match: %s.", jsonText(not)))
	}
	out["type"] = "object"
	if len(props) > 0 {
		out["properties"] = props
	}
	if len(required) > 0 {
		out["required"] = toAnyList(required)
	}
	addNotes(out, notes...)
	return out
}

// plainObjectBranch reports whether a combinator branch only constrains
// the object's own fields (properties, required, a description), so its
// fields can join the root's.
func plainObjectBranch(b map[string]any) bool {
	for k := range b {
		switch k {
		case "properties", "required", "description", "title", "type", "additionalProperties":
		default:
			return false
		}
	}
	t, hasType := b["type"]
	return !hasType || t == "object"
}

// describeBranch says what one alternative of anyOf or oneOf asks for:
// the fields it requires ("name and content"), else the fields it defines.
func describeBranch(b map[string]any, req []string) string {
	var what string
	switch bp, _ := b["properties"].(map[string]any); {
	case len(req) > 0:
		what = strings.Join(req, " and ")
	case len(bp) > 0:
		what = "the fields " + strings.Join(slices.Sorted(maps.Keys(bp)), ", ")
	default:
		what = "any input"
	}
	if d, _ := b["description"].(string); d != "" {
		what += " (" + strings.TrimRight(d, ". ") + ")"
	}
	return what
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

// MCP.

// mcpAnnotationsFor derives the MCP behaviour hints from the security level,
// category and network setting, so a client can warn before a destructive
// call or one that reaches outside the host. A hint says false only when
// that is known: only a safe tool is known not to destroy.
func mcpAnnotationsFor(def tooldef.Definition) (mcpAnnotations, error) {
	a := mcpAnnotations{Title: mcpTitle(def.Name)}
	switch def.Security.Level {
	case tooldef.LevelSafe:
		a.ReadOnlyHint, a.IdempotentHint = true, true
	case tooldef.LevelModerate, tooldef.LevelDangerous:
		// A moderate tool may write, send or delete (file_write,
		// http_request's DELETE, code_execute): that its changes are
		// only additive is not known, so it keeps MCP's default, true.
		a.DestructiveHint = true
	default:
		return a, models.ErrInvalid.Errorf("tool %q has unknown security level %q (want one of %s)", def.Name, def.Security.Level, strings.Join(tooldef.Levels, ", "))
	}
	switch def.Category {
	case "browser", "search", "api":
		a.OpenWorldHint = true
	default:
		a.OpenWorldHint = def.Security.Network
	}
	return a, nil
}

// mcpTitle turns a snake_case name into a display title: "file_read" becomes
// "File Read".
func mcpTitle(name string) string {
	words := strings.FieldsFunc(name, func(r rune) bool { return r == '_' })
	for i, w := range words {
		words[i] = strings.ToUpper(w[:1]) + w[1:]
	}
	return strings.Join(words, " ")
}

// OpenAI strict mode.

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

// Gemini.

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
