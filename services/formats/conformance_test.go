package formats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"toolbelt/internal/nodetest"
	"toolbelt/services/tooldef"
)

// conformanceCase is a tool's parameters with instances valid and invalid
// for them (testdata/conformance.json, and the built-in tools).
type conformanceCase struct {
	Name       string            `json:"name"`
	Parameters json.RawMessage   `json:"parameters"`
	Valid      []json.RawMessage `json:"valid"`
	Invalid    []json.RawMessage `json:"invalid"`
}

// TestConformance renders a corpus of hard schemas (nested objects, arrays
// of objects, optional and nullable fields, integer enums, combinators at
// the root and inside, $ref and recursion, formats, defaults and bounds,
// unusual names, free-form objects, tuples, deep nesting, no parameters)
// and the built-in tools into every format, and has the validators the
// providers' ecosystems use check each rendering (testdata/node/
// conformance.mjs): Ajv, in strict mode, compiles every parameters schema
// under the provider's dialect and accepts every valid instance as a model
// would send it (nulls for what strict mode leaves out; free-form objects
// as JSON text for Gemini), and the MCP SDK's ToolSchema and
// ListToolsResultSchema parse the mcp renderings. Renderings that keep
// every constraint (anthropic, mcp) must reject every invalid instance;
// how many the others still reject is logged.
func TestConformance(t *testing.T) {
	cases := conformanceCorpus(t)
	type check struct {
		ID      string            `json:"id"`
		Dialect string            `json:"dialect"`
		Schema  any               `json:"schema"`
		MCPTool json.RawMessage   `json:"mcpTool,omitempty"`
		Valid   []any             `json:"valid"`
		Invalid []json.RawMessage `json:"invalid"`
	}
	var checks []check
	var mcpTools []json.RawMessage
	keepsAll := map[string]bool{FormatAnthropic: true, FormatMCP: true}
	for _, c := range cases {
		def := c.definition()
		// Registration takes these parameters (the rest of the
		// definition is not under test).
		_, ps := tooldef.Validate(&def, func(string) bool { return false })
		ps = append(ps, propertyNameProblems(decodeNumbers(t, c.Parameters), "/parameters")...)
		for _, p := range ps {
			if strings.HasPrefix(p.Pointer, "/parameters") {
				t.Fatalf("%s: registration refuses the corpus's parameters: %v", c.Name, p)
			}
		}
		original := conformanceSchema(t, c)
		all, err := RenderAll(def)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		for _, format := range Formats {
			var tool map[string]any
			if err := json.Unmarshal(all[format], &tool); err != nil {
				t.Fatal(err)
			}
			schema, strict := renderedSchema(tool, format)
			ch := check{ID: c.Name + "/" + format, Dialect: "2020-12", Schema: schema, Invalid: c.Invalid}
			if format == FormatGemini {
				// Gemini's own rules, which no published validator checks.
				if schema != nil {
					for _, v := range geminiViolations(schema, c.Name+"/gemini") {
						t.Error(v)
					}
				}
				if schema == nil { // no parameters: Gemini calls with none
					schema = map[string]any{"type": "object"}
				}
				// Ajv knows every keyword of parametersJsonSchema but
				// Gemini's own propertyOrdering, which asserts nothing.
				ch.Schema = withoutPropertyOrdering(schema)
			}
			if format != FormatGemini {
				// A boolean items: a draft-07 reader (the MCP SDKs'
				// default validators) refuses every tuple, and a strict
				// MCP client refuses the boolean itself.
				for _, at := range booleanItemsIn(schema, "") {
					t.Errorf("%s: boolean items at %s", ch.ID, at)
				}
			}
			if format == FormatMCP {
				ch.MCPTool = all[format]
				mcpTools = append(mcpTools, all[format])
			}
			for i, raw := range c.Valid {
				v := decodeNumbers(t, raw)
				if strict {
					fillNulls(v, schema) // what a model in strict mode sends
				}
				if format == FormatGemini {
					v = asJSONText(v, schema) // free-form objects as Gemini is asked to write them
				}
				ch.Valid = append(ch.Valid, v)
				// What comes back is what the tool takes: the server
				// drops those nulls before validating.
				back := decodeNumbers(t, mustMarshal(t, v))
				tooldef.PlanArgs(decodeNumbers(t, c.Parameters)).Apply(back)
				if err := original.Validate(back); err != nil {
					t.Errorf("%s: valid instance #%d as a model would send it is refused once back: %v", ch.ID, i, err)
				}
				if want := canonicalJSON(t, string(raw)); canonicalJSON(t, string(mustMarshal(t, back))) != want {
					t.Errorf("%s: valid instance #%d comes back as %s, not %s", ch.ID, i, mustMarshal(t, back), want)
				}
			}
			checks = append(checks, ch)
		}
	}
	listTools := map[string]any{"tools": mcpTools, "nextCursor": "opaque"}
	out := nodetest.Run(t, mustMarshal(t, map[string]any{"cases": checks, "listTools": listTools}), "conformance.mjs")
	var report struct {
		Results []struct {
			ID              string   `json:"id"`
			Compiled        bool     `json:"compiled"`
			Error           string   `json:"error"`
			ValidRejected   []string `json:"validRejected"`
			InvalidAccepted []int    `json:"invalidAccepted"`
			MCPTool         string   `json:"mcpTool"`
		} `json:"results"`
		ListTools string `json:"listTools"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("conformance.mjs printed %q: %v", out, err)
	}
	if len(report.Results) != len(checks) {
		t.Fatalf("%d results for %d renderings", len(report.Results), len(checks))
	}
	rejected, invalid, compiled := map[string]int{}, map[string]int{}, map[string]int{}
	for i, r := range report.Results {
		format := r.ID[strings.LastIndexByte(r.ID, '/')+1:]
		if !r.Compiled {
			t.Errorf("%s: Ajv refuses the rendered schema: %s", r.ID, r.Error)
			continue
		}
		compiled[format]++
		for _, why := range r.ValidRejected {
			t.Errorf("%s: Ajv rejects valid instance %s", r.ID, why)
		}
		if format == FormatMCP && r.MCPTool != "ok" {
			t.Errorf("%s: the MCP SDK's ToolSchema refuses the tool: %s", r.ID, r.MCPTool)
		}
		n := len(checks[i].Invalid)
		invalid[format] += n
		rejected[format] += n - len(r.InvalidAccepted)
		if keepsAll[format] && len(r.InvalidAccepted) > 0 {
			t.Errorf("%s: accepts invalid instances %v, which the original schema rejects", r.ID, r.InvalidAccepted)
		}
	}
	if !strings.HasPrefix(report.ListTools, "ok") {
		t.Errorf("the MCP SDK's ListToolsResultSchema refuses the list: %s", report.ListTools)
	}
	for _, f := range Formats {
		t.Logf("%s: %d of %d schemas compile under Ajv; %d of %d invalid instances still rejected", f, compiled[f], len(cases), rejected[f], invalid[f])
	}
}

// withoutPropertyOrdering is a copy of s without Gemini's propertyOrdering
// keyword, at any depth.
func withoutPropertyOrdering(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if k != "propertyOrdering" {
				out[k] = withoutPropertyOrdering(e)
			}
		}
		if props, ok := x["properties"].(map[string]any); ok {
			p := make(map[string]any, len(props))
			for name, e := range props {
				p[name] = withoutPropertyOrdering(e) // a property may be named propertyOrdering
			}
			out["properties"] = p
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = withoutPropertyOrdering(e)
		}
		return out
	}
	return v
}

// asJSONText writes v as a model following the Gemini rendering schema
// does: an object where schema asks for a string, as JSON text.
func asJSONText(v any, schema map[string]any) any {
	switch x := v.(type) {
	case map[string]any:
		if schema["type"] == "string" {
			raw, _ := json.Marshal(x)
			return string(raw)
		}
		props, _ := schema["properties"].(map[string]any)
		for k, e := range x {
			if ps, ok := props[k].(map[string]any); ok {
				x[k] = asJSONText(e, ps)
			}
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, e := range x {
				x[i] = asJSONText(e, items)
			}
		}
	}
	return v
}

// definition is the tool the case's parameters are registered with (the
// rest of the definition is not under test).
func (c conformanceCase) definition() tooldef.Definition {
	return tooldef.Definition{
		Name: c.Name, Version: "1.0.0", Description: "The " + c.Name + " tool.", Category: "general",
		Parameters: c.Parameters, Security: tooldef.Security{Level: tooldef.LevelSafe},
		Runner: tooldef.Runner{Kind: tooldef.RunnerBuiltin, Builtin: c.Name},
	}
}

// conformanceCorpus is testdata/conformance.json and the built-in tools
// (their parameters, no instances).
func conformanceCorpus(t *testing.T) []conformanceCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "conformance.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []conformanceCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("..", "catalog", "builtin", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no built-in tools: %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var def tooldef.Definition
		if err := json.Unmarshal(raw, &def); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, conformanceCase{Name: def.Name, Parameters: def.Parameters})
	}
	return cases
}

// conformanceSchema compiles a case's parameters and checks its own
// instances against them, so the corpus says what it means.
func conformanceSchema(t *testing.T, c conformanceCase) *jsonschema.Schema {
	t.Helper()
	s, err := tooldef.CompileSchema(decodeNumbers(t, c.Parameters))
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	for i, v := range c.Valid {
		if err := s.Validate(decodeNumbers(t, v)); err != nil {
			t.Fatalf("%s: valid instance #%d is invalid: %v", c.Name, i, err)
		}
	}
	for i, v := range c.Invalid {
		if s.Validate(decodeNumbers(t, v)) == nil {
			t.Fatalf("%s: invalid instance #%d is valid", c.Name, i)
		}
	}
	return s
}

// renderedSchema is a rendering's parameters schema, and whether it is
// marked strict.
func renderedSchema(tool map[string]any, format string) (map[string]any, bool) {
	var s any
	strict := false
	switch format {
	case FormatOpenAI:
		fn := tool["function"].(map[string]any)
		s, strict = fn["parameters"], fn["strict"] == true
	case FormatOpenAIResponses:
		s, strict = tool["parameters"], tool["strict"] == true
	case FormatAnthropic:
		s = tool["input_schema"]
	case FormatGemini:
		s = tool["parametersJsonSchema"]
	case FormatMCP:
		s = tool["inputSchema"]
	}
	m, _ := s.(map[string]any)
	return m, strict
}

func decodeNumbers(t *testing.T, raw []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// booleanItemsIn lists where schema has a boolean items.
func booleanItemsIn(v any, at string) []string {
	s, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	var out []string
	if _, isBool := s["items"].(bool); isBool {
		out = append(out, at+"/items")
	}
	for _, k := range oneSchema {
		out = append(out, booleanItemsIn(s[k], at+"/"+k)...)
	}
	for _, k := range schemaLists {
		list, _ := s[k].([]any)
		for i, sub := range list {
			out = append(out, booleanItemsIn(sub, fmt.Sprintf("%s/%s/%d", at, k, i))...)
		}
	}
	for _, k := range schemaMaps {
		m, _ := s[k].(map[string]any)
		for name, sub := range m {
			out = append(out, booleanItemsIn(sub, at+"/"+k+"/"+name)...)
		}
	}
	return out
}
