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

// Formats lists the LLM formats a tool can be exported in.
var Formats = []string{FormatOpenAI, FormatOpenAIResponses, FormatAnthropic, FormatGemini, FormatMCP}

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

// UnknownFormat is the error for a format not in Formats, naming those
// that are.
func UnknownFormat(format string) error {
	return models.ErrInvalid.Errorf("unknown format %q (want one of %s)", format, strings.Join(Formats, ", "))
}

// render renders def in format from schema, its parsed parameters;
// each provider's file builds its tool shape.
func render(def tooldef.Definition, schema map[string]any, format string) (json.RawMessage, error) {
	if err := checkName(def.Name, format); err != nil {
		return nil, err
	}
	desc := strings.TrimSpace(def.Description)
	var tool any
	switch format {
	case FormatOpenAI:
		tool = newOpenAITool(def.Name, desc, schema)
	case FormatOpenAIResponses:
		tool = newResponsesTool(def.Name, desc, schema)
	case FormatAnthropic:
		tool = newAnthropicTool(def.Name, desc, schema)
	case FormatGemini:
		tool = newGeminiFunction(def.Name, desc, schema)
	case FormatMCP:
		t, err := newMCPTool(def, desc, schema)
		if err != nil {
			return nil, err
		}
		tool = t
	default:
		return nil, UnknownFormat(format)
	}
	raw, err := marshalCompact(tool)
	if err != nil {
		return nil, fmt.Errorf("render tool %q as %s: %w", def.Name, format, err)
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
