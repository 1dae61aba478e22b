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
// 6: no boolean items in MCP, OpenAI and Anthropic: a closed tuple's
// items false becomes maxItems.
const Revision = "6"

// Format is one export format: the format= value, the LLM API it is
// for, what one export is, and how a tool is rendered in it.
type Format struct {
	Name string
	// Label names the LLM API, as the console shows it.
	Label string
	// Renders says what one export is (the OpenAPI document's word for
	// each rendering's shape).
	Renders string
	// nameRule is the API's rule for a tool's name.
	nameRule *regexp.Regexp
	// build makes the tool shape from the definition, its trimmed
	// description and its parsed parameters.
	build func(def tooldef.Definition, desc string, schema map[string]any) (any, error)
}

// table is the one declaration of the export formats, in the order every
// list shows them. Formats, the console's exports and playground and the
// OpenAPI document's renderings derive from it; the enums the swag
// annotations spell out and the docs' tables are checked against it
// (TestFormatsAgree in web).
var table = []Format{
	{Name: FormatOpenAI, Label: "OpenAI Chat Completions", Renders: "A Chat Completions tools[] entry.", nameRule: apiNameRule, build: byName(newOpenAITool)},
	{Name: FormatOpenAIResponses, Label: "OpenAI Responses", Renders: "A Responses API tools[] entry.", nameRule: apiNameRule, build: byName(newResponsesTool)},
	{Name: FormatAnthropic, Label: "Anthropic Messages", Renders: "A Messages API tool.", nameRule: apiNameRule, build: byName(newAnthropicTool)},
	{Name: FormatGemini, Label: "Gemini function declaration", Renders: "A FunctionDeclaration.", nameRule: geminiNameRule, build: byName(newGeminiFunction)},
	{Name: FormatMCP, Label: "MCP tool", Renders: "A Model Context Protocol Tool.", nameRule: mcpNameRule,
		build: func(def tooldef.Definition, desc string, schema map[string]any) (any, error) {
			return newMCPTool(def, desc, schema)
		}},
}

// byName adapts a renderer that needs only the tool's name, description
// and schema, and cannot fail, to Format.build.
func byName[T any](build func(name, desc string, schema map[string]any) T) func(tooldef.Definition, string, map[string]any) (any, error) {
	return func(def tooldef.Definition, desc string, schema map[string]any) (any, error) {
		return build(def.Name, desc, schema), nil
	}
}

// Formats lists the names of the LLM formats a tool can be exported in,
// in table's order.
var Formats = func() []string {
	names := make([]string, len(table))
	for i, f := range table {
		names[i] = f.Name
	}
	return names
}()

// All returns the export formats in table's order (a copy: the table
// stays as declared).
func All() []Format { return slices.Clone(table) }

// Lookup returns the named format; ok is false for a name not in the
// table.
func Lookup(name string) (f Format, ok bool) {
	i := slices.IndexFunc(table, func(f Format) bool { return f.Name == name })
	if i < 0 {
		return Format{}, false
	}
	return table[i], true
}

// Render returns def in the named format, as the JSON object that format's
// API accepts as one tool.
func Render(def tooldef.Definition, format string) (json.RawMessage, error) {
	f, ok := Lookup(format)
	if !ok {
		return nil, UnknownFormat(format)
	}
	schema, err := parseParameters(def)
	if err != nil {
		return nil, err
	}
	return render(def, schema, f)
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
	out := make(map[string]json.RawMessage, len(table))
	for _, f := range table {
		raw, err := render(def, schema, f)
		if err != nil {
			return nil, err
		}
		out[f.Name] = raw
	}
	return out, nil
}

// UnknownFormat is the error for a format not in Formats, naming those
// that are.
func UnknownFormat(format string) error {
	return models.ErrInvalid.Errorf("unknown format %q (want one of %s)", format, strings.Join(Formats, ", "))
}

// render renders def in f from schema, its parsed parameters; each
// provider's file builds its tool shape.
func render(def tooldef.Definition, schema map[string]any, f Format) (json.RawMessage, error) {
	if !f.nameRule.MatchString(def.Name) {
		return nil, models.ErrInvalid.Errorf("tool name %q does not fit the %s name rule %s", def.Name, f.Name, f.nameRule)
	}
	tool, err := f.build(def, strings.TrimSpace(def.Description), schema)
	if err != nil {
		return nil, err
	}
	raw, err := marshalCompact(tool)
	if err != nil {
		return nil, fmt.Errorf("render tool %q as %s: %w", def.Name, f.Name, err)
	}
	return raw, nil
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
