package formats

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"toolbelt/models"
	"toolbelt/services/tooldef"
)

var updateFormatGoldens = flag.Bool("update", false, "rewrite the golden files in testdata/formats")

// renderCase is a tool definition rendered into golden files, with the
// strict verdict OpenAI should get and arguments valid for its schema.
type renderCase struct {
	name       string
	def        tooldef.Definition
	wantStrict bool
	sample     string
}

func renderCases() []renderCase {
	tool := func(name, level, category string, network bool, params string) tooldef.Definition {
		return tooldef.Definition{
			Name:        name,
			Version:     "1.0.0",
			Description: "  The " + strings.ReplaceAll(name, "_", " ") + " tool: <input> & output.\n",
			Category:    category,
			Parameters:  json.RawMessage(params),
			Security:    tooldef.Security{Level: level, Network: network},
			Runner:      tooldef.Runner{Kind: tooldef.RunnerBuiltin, Builtin: name},
		}
	}
	return []renderCase{
		{
			name: "file_read",
			def: tool("file_read", tooldef.LevelSafe, "filesystem", false, `{
				"$schema": "https://json-schema.org/draft/2020-12/schema",
				"type": "object",
				"properties": {
					"path": {"type": "string", "description": "Path relative to the work directory"},
					"encoding": {"type": "string", "enum": ["utf-8", "latin-1"], "description": "Text encoding"}
				},
				"required": ["path", "encoding"],
				"additionalProperties": false
			}`),
			wantStrict: true,
			sample:     `{"path": "config.yaml", "encoding": "utf-8"}`,
		},
		{
			name: "web_search",
			def: tool("web_search", tooldef.LevelSafe, "search", true, `{
				"type": "object",
				"properties": {
					"query": {"type": "string", "description": "What to search for"},
					"limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
					"safe_search": {"type": "boolean"},
					"freshness": {"type": "string", "enum": ["day", "week", "month"]}
				},
				"required": ["query"],
				"additionalProperties": false
			}`),
			wantStrict: true, // optional fields become nullable; the default is stated
			sample:     `{"query": "go generics", "limit": 3}`,
		},
		{
			name: "deploy_service",
			def: tool("deploy_service", tooldef.LevelDangerous, "shell", false, `{
				"type": "object",
				"properties": {
					"service": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$"},
					"replicas": {"type": "integer", "minimum": 1, "maximum": 50},
					"env": {
						"type": "array",
						"maxItems": 20,
						"items": {
							"type": "object",
							"properties": {"name": {"type": "string"}, "value": {"type": "string"}},
							"required": ["name", "value"],
							"additionalProperties": false
						}
					},
					"rollout": {
						"type": "object",
						"properties": {
							"strategy": {"type": "string", "enum": ["rolling", "recreate"]},
							"max_unavailable": {"type": ["integer", "null"], "minimum": 0}
						},
						"required": ["strategy", "max_unavailable"],
						"additionalProperties": false
					},
					"notify": {"anyOf": [{"type": "string", "format": "email"}, {"type": "null"}], "description": "Who to tell"}
				},
				"required": ["service", "replicas", "env", "rollout", "notify"],
				"additionalProperties": false
			}`),
			wantStrict: true,
			sample: `{"service": "api", "replicas": 3, "env": [{"name": "MODE", "value": "prod"}],
				"rollout": {"strategy": "rolling", "max_unavailable": null}, "notify": "ops@example.com"}`,
		},
		{
			name: "record_update",
			def: tool("record_update", tooldef.LevelModerate, "api", false, `{
				"$schema": "https://json-schema.org/draft/2020-12/schema",
				"$id": "https://toolbelt.example/schemas/record_update",
				"type": "object",
				"$defs": {
					"address": {
						"type": "object",
						"properties": {"street": {"type": "string"}, "city": {"type": "string"}, "country": {"const": "NL"}},
						"required": ["street", "city"]
					},
					"stamp": {
						"type": "object",
						"properties": {"by": {"type": "string"}, "at": {"type": "string", "format": "date-time"}},
						"required": ["by"]
					}
				},
				"properties": {
					"id": {"type": "integer", "exclusiveMinimum": 0, "description": "Record id"},
					"note": {"type": ["string", "null"], "maxLength": 500},
					"kind": {"const": "customer"},
					"version": {"const": 2},
					"priority": {"type": "integer", "enum": [1, 2, 3], "description": "1 is highest"},
					"score": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
					"contact": {"oneOf": [
						{"type": "string", "format": "email"},
						{"type": "object", "properties": {"phone": {"type": "string"}}, "required": ["phone"], "additionalProperties": false}
					]},
					"address": {"$ref": "#/$defs/address", "description": "Postal address"},
					"labels": {"type": "object", "additionalProperties": {"type": "string"}},
					"value": {"type": ["string", "number", "boolean"]},
					"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "examples": [["vip"]]},
					"website": {"type": "string", "format": "uri"},
					"audit": {"allOf": [
						{"$ref": "#/$defs/stamp"},
						{"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]}
					]}
				},
				"required": ["id", "kind"],
				"additionalProperties": false
			}`),
			sample: `{"id": 7, "kind": "customer", "version": 2, "priority": 1, "score": 0.5,
				"contact": {"phone": "+31 20 123"}, "address": {"street": "Dam 1", "city": "Amsterdam", "country": "NL"},
				"labels": {"team": "sales"}, "value": true, "tags": ["vip"], "audit": {"by": "ann", "reason": "moved"}}`,
		},
		{
			name: "tree_write",
			def: tool("tree_write", tooldef.LevelModerate, "filesystem", false, `{
				"type": "object",
				"$defs": {
					"node": {
						"type": "object",
						"description": "A file or directory",
						"properties": {
							"name": {"type": "string"},
							"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}
						},
						"required": ["name", "children"],
						"additionalProperties": false
					}
				},
				"properties": {"root": {"$ref": "#/$defs/node"}},
				"required": ["root"],
				"additionalProperties": false
			}`),
			wantStrict: true,
			sample:     `{"root": {"name": "src", "children": [{"name": "main.go", "children": []}]}}`,
		},
		{
			name: "file_find",
			def: tool("file_find", tooldef.LevelSafe, "filesystem", false, `{
				"type": "object",
				"properties": {
					"name": {"type": "string", "description": "Glob on the file name"},
					"content": {"type": "string", "description": "Regular expression on the content"}
				},
				"anyOf": [{"required": ["name"]}, {"required": ["content"]}],
				"additionalProperties": false
			}`),
			// Strict: the root's alternatives are stated in the description
			// and both fields nullable; the server still checks one is set.
			wantStrict: true,
			sample:     `{"content": "TODO"}`,
		},
		{
			name:   "clock_now",
			def:    tool("clock_now", tooldef.LevelSafe, "code", false, `{"type": "object", "properties": {}}`),
			sample: `{}`,
		},
	}
}

func goldenPath(c, format string) string {
	return filepath.Join("testdata", "formats", c+"."+format+".json")
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range renderCases() {
		all, err := RenderAll(tc.def)
		if err != nil {
			t.Fatalf("RenderAll(%s): %v", tc.name, err)
		}
		if len(all) != len(Formats) {
			t.Errorf("RenderAll(%s) returned %d formats, want %d", tc.name, len(all), len(Formats))
		}
		for _, format := range Formats {
			t.Run(tc.name+"/"+format, func(t *testing.T) {
				got := all[format]
				one, err := Render(tc.def, format)
				if err != nil {
					t.Fatalf("Render: %v", err)
				}
				if !bytes.Equal(one, got) {
					t.Errorf("Render and RenderAll differ:\n%s\n%s", one, got)
				}
				var compact bytes.Buffer
				if err := json.Compact(&compact, got); err != nil {
					t.Fatalf("output is not JSON: %v\n%s", err, got)
				}
				if !bytes.Equal(compact.Bytes(), got) {
					t.Errorf("output is not compact:\n%s", got)
				}
				var pretty bytes.Buffer
				if err := json.Indent(&pretty, got, "", "  "); err != nil {
					t.Fatal(err)
				}
				pretty.WriteByte('\n')
				path := goldenPath(tc.name, format)
				if *updateFormatGoldens {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./services/formats -run TestRenderGolden -update)", err)
				}
				if !bytes.Equal(pretty.Bytes(), want) {
					t.Errorf("%s differs from the golden file:\ngot:\n%s\nwant:\n%s", path, pretty.Bytes(), want)
				}
			})
		}
	}
}

func TestRenderDeterministic(t *testing.T) {
	for _, tc := range renderCases() {
		first, err := RenderAll(tc.def)
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			again, err := RenderAll(tc.def)
			if err != nil {
				t.Fatal(err)
			}
			for _, format := range Formats {
				if !bytes.Equal(first[format], again[format]) {
					t.Fatalf("%s/%s differs between runs:\n%s\n%s", tc.name, format, first[format], again[format])
				}
			}
		}
	}
}

// TestRenderRules walks every rendered tool and checks the rules of its
// API, independently of the code that produced it.
func TestRenderRules(t *testing.T) {
	for _, tc := range renderCases() {
		all, err := RenderAll(tc.def)
		if err != nil {
			t.Fatal(err)
		}
		for _, format := range Formats {
			t.Run(tc.name+"/"+format, func(t *testing.T) {
				var tool map[string]any
				if err := json.Unmarshal(all[format], &tool); err != nil {
					t.Fatal(err)
				}
				var problems []string
				switch format {
				case FormatOpenAI:
					problems = checkOpenAI(tool, tc.wantStrict)
				case FormatOpenAIResponses:
					problems = checkResponses(tool, tc.wantStrict)
				case FormatAnthropic:
					problems = checkAnthropic(tool)
				case FormatGemini:
					problems = checkGemini(tool)
				case FormatMCP:
					problems = checkMCP(tool, tc.def)
				}
				if tool["name"] != nil && tool["name"] != tc.def.Name {
					problems = append(problems, fmt.Sprintf("name is %v, want %s", tool["name"], tc.def.Name))
				}
				for _, p := range problems {
					t.Error(p)
				}
				if len(problems) > 0 {
					t.Logf("output: %s", all[format])
				}
			})
		}
	}
}

// The API rules, stated as the API documentation states them.
var (
	openAIName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	geminiName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$`)
	mcpName    = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)

	geminiAllowed = []string{
		"type", "format", "title", "description", "enum", "items", "minItems", "maxItems",
		"properties", "required", "minProperties", "maxProperties", "minLength", "maxLength", "pattern",
		"minimum", "maximum", "anyOf", "default", "propertyOrdering", "examples",
	}
	geminiTypes       = []string{"string", "number", "integer", "boolean", "array", "object"}
	geminiFormatOK    = map[string][]string{"string": {"date-time"}, "number": {"float", "double"}, "integer": {"int32", "int64"}}
	strictUnsupported = []string{"allOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas", "patternProperties", "oneOf"}
)

func keysOf(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func onlyKeys(where string, m map[string]any, allowed ...string) []string {
	var problems []string
	for _, k := range keysOf(m) {
		if !slices.Contains(allowed, k) {
			problems = append(problems, fmt.Sprintf("%s: unexpected key %q", where, k))
		}
	}
	return problems
}

func checkOpenAI(tool map[string]any, wantStrict bool) []string {
	problems := onlyKeys("tool", tool, "type", "function")
	if tool["type"] != "function" {
		problems = append(problems, "type is not \"function\"")
	}
	fn, _ := tool["function"].(map[string]any)
	problems = append(problems, onlyKeys("function", fn, "name", "description", "parameters", "strict")...)
	if name, _ := fn["name"].(string); !openAIName.MatchString(name) {
		problems = append(problems, fmt.Sprintf("name %q breaks %s", name, openAIName))
	}
	strict, present := fn["strict"]
	if present && strict != true {
		problems = append(problems, "strict is present but not true")
	}
	return append(problems, checkStrictClaim(fn["parameters"], strict == true, wantStrict)...)
}

func checkResponses(tool map[string]any, wantStrict bool) []string {
	problems := onlyKeys("tool", tool, "type", "name", "description", "parameters", "strict")
	if tool["type"] != "function" {
		problems = append(problems, "type is not \"function\"")
	}
	if name, _ := tool["name"].(string); !openAIName.MatchString(name) {
		problems = append(problems, fmt.Sprintf("name %q breaks %s", name, openAIName))
	}
	strict, ok := tool["strict"].(bool)
	if !ok {
		problems = append(problems, "strict must be an explicit boolean")
	}
	return append(problems, checkStrictClaim(tool["parameters"], strict, wantStrict)...)
}

// checkStrictClaim checks a strict verdict against the strict-mode rules.
func checkStrictClaim(params any, strict, wantStrict bool) []string {
	var problems []string
	schema, _ := params.(map[string]any)
	if schema["type"] != "object" {
		problems = append(problems, "parameters type is not \"object\"")
	}
	problems = append(problems, rootCombinatorsIn("parameters", schema)...)
	for _, k := range []string{"$schema", "$id"} {
		if _, ok := schema[k]; ok {
			problems = append(problems, "parameters keep "+k)
		}
	}
	if strict {
		for _, v := range strictViolations(schema, "#", true) {
			problems = append(problems, "strict is true but "+v)
		}
	}
	if strict != wantStrict {
		problems = append(problems, fmt.Sprintf("strict is %v, want %v", strict, wantStrict))
	}
	return problems
}

// strictViolations lists where schema breaks OpenAI's strict-mode rules.
func strictViolations(v any, at string, root bool) []string {
	s, ok := v.(map[string]any)
	if !ok {
		return []string{at + " is not an object schema"}
	}
	var out []string
	if root {
		if _, ok := s["anyOf"]; ok {
			out = append(out, at+" is a root anyOf")
		}
	}
	for _, k := range strictUnsupported {
		if _, ok := s[k]; ok {
			out = append(out, fmt.Sprintf("%s uses %s", at, k))
		}
	}
	isObject := s["type"] == "object"
	if list, ok := s["type"].([]any); ok {
		isObject = slices.Contains(list, any("object"))
	}
	props, hasProps := s["properties"].(map[string]any)
	if isObject || hasProps {
		if s["additionalProperties"] != false {
			out = append(out, at+" lacks additionalProperties: false")
		}
		required, _ := s["required"].([]any)
		for name := range props {
			if !slices.Contains(required, any(name)) {
				out = append(out, fmt.Sprintf("%s does not require %q", at, name))
			}
		}
	}
	for name, p := range props {
		out = append(out, strictViolations(p, at+"/properties/"+name, false)...)
	}
	if items, ok := s["items"]; ok {
		out = append(out, strictViolations(items, at+"/items", false)...)
	}
	for _, key := range []string{"anyOf", "oneOf", "allOf"} {
		list, _ := s[key].([]any)
		for i, b := range list {
			out = append(out, strictViolations(b, fmt.Sprintf("%s/%s/%d", at, key, i), false)...)
		}
	}
	for _, key := range []string{"$defs", "definitions"} {
		defs, _ := s[key].(map[string]any)
		for name, d := range defs {
			out = append(out, strictViolations(d, at+"/"+key+"/"+name, false)...)
		}
	}
	return out
}

func checkAnthropic(tool map[string]any) []string {
	problems := onlyKeys("tool", tool, "name", "description", "input_schema")
	if name, _ := tool["name"].(string); !openAIName.MatchString(name) {
		problems = append(problems, fmt.Sprintf("name %q breaks %s", name, openAIName))
	}
	schema, _ := tool["input_schema"].(map[string]any)
	if schema["type"] != "object" {
		problems = append(problems, "input_schema.type is not \"object\"")
	}
	problems = append(problems, rootCombinatorsIn("input_schema", schema)...)
	for _, k := range []string{"$schema", "$id"} {
		if _, ok := schema[k]; ok {
			problems = append(problems, "input_schema keeps "+k)
		}
	}
	return problems
}

func checkGemini(tool map[string]any) []string {
	problems := onlyKeys("declaration", tool, "name", "description", "parametersJsonSchema")
	if name, _ := tool["name"].(string); !geminiName.MatchString(name) {
		problems = append(problems, fmt.Sprintf("name %q breaks %s", name, geminiName))
	}
	raw, present := tool["parametersJsonSchema"]
	if !present {
		return problems // a tool without parameters
	}
	params, _ := raw.(map[string]any)
	if params["type"] != "object" {
		problems = append(problems, "parametersJsonSchema.type is not \"object\"")
	}
	// Gemini: "properties: should be non-empty for OBJECT type".
	if props, _ := params["properties"].(map[string]any); len(props) == 0 {
		problems = append(problems, "parametersJsonSchema is an object without properties")
	}
	return append(problems, geminiViolations(params, "parametersJsonSchema")...)
}

// geminiViolations lists where s, a JSON Schema, leaves the subset Gemini
// documents for a function's parameters: one type (or one and "null"),
// string enums, the formats it knows, no free-form objects.
func geminiViolations(v any, at string) []string {
	s, ok := v.(map[string]any)
	if !ok {
		return []string{at + " is not a schema object"}
	}
	var out []string
	for _, k := range []string{"additionalProperties", "$ref", "$defs", "const", "oneOf", "allOf"} {
		if _, ok := s[k]; ok {
			out = append(out, fmt.Sprintf("%s has %s", at, k))
		}
	}
	out = append(out, onlyKeys(at, s, geminiAllowed...)...)
	raw, hasType := s["type"]
	_, hasAnyOf := s["anyOf"]
	var t any     // the type but null
	null := false // whether "null" is among the types
	switch {
	case !hasType && !hasAnyOf:
		out = append(out, at+" has neither type nor anyOf")
	case hasType:
		t = raw
		if list, ok := raw.([]any); ok && len(list) == 2 && list[1] == "null" {
			t, null = list[0], true
		}
		ts, ok := t.(string)
		if !ok {
			out = append(out, fmt.Sprintf("%s.type is %v, not one type (or one and \"null\")", at, raw))
		} else if !slices.Contains(geminiTypes, ts) {
			out = append(out, fmt.Sprintf("%s.type %q is unknown", at, ts))
		}
	}
	if f, ok := s["format"]; ok && !slices.Contains(geminiFormatOK[fmt.Sprint(t)], fmt.Sprint(f)) {
		out = append(out, fmt.Sprintf("%s.format %v is not accepted for type %v", at, f, t))
	}
	if e, ok := s["enum"]; ok {
		list, _ := e.([]any)
		if t != "string" || len(list) == 0 {
			out = append(out, at+".enum needs type string and values")
		}
		for i, v := range list {
			if _, ok := v.(string); !ok && !(v == nil && null && i == len(list)-1) {
				out = append(out, fmt.Sprintf("%s.enum has %v, neither a string nor the null of a nullable type", at, v))
			}
		}
	}
	if ex, ok := s["examples"]; ok {
		if list, _ := ex.([]any); len(list) != 1 {
			out = append(out, at+".examples is not one example")
		}
	}
	props, _ := s["properties"].(map[string]any)
	if p, ok := s["properties"]; ok && len(props) == 0 {
		out = append(out, fmt.Sprintf("%s.properties is empty or malformed: %v", at, p))
	}
	// "properties: should be non-empty for OBJECT type"
	if t == "object" && len(props) == 0 {
		out = append(out, at+" is an OBJECT without properties")
	}
	for _, key := range []string{"required", "propertyOrdering"} {
		list, _ := s[key].([]any)
		for _, name := range list {
			if _, ok := props[fmt.Sprint(name)]; !ok {
				out = append(out, fmt.Sprintf("%s.%s names %v, which is not a property", at, key, name))
			}
		}
	}
	for name, p := range props {
		out = append(out, geminiViolations(p, at+".properties."+name)...)
	}
	if t == "array" {
		if _, ok := s["items"]; !ok {
			out = append(out, at+" is an array without items")
		}
	}
	if items, ok := s["items"]; ok {
		out = append(out, geminiViolations(items, at+".items")...)
	}
	if list, ok := s["anyOf"].([]any); ok {
		for i, b := range list {
			out = append(out, geminiViolations(b, fmt.Sprintf("%s.anyOf[%d]", at, i))...)
		}
	}
	return out
}

func checkMCP(tool map[string]any, def tooldef.Definition) []string {
	problems := onlyKeys("tool", tool, "name", "title", "description", "inputSchema", "annotations")
	if name, _ := tool["name"].(string); !mcpName.MatchString(name) {
		problems = append(problems, fmt.Sprintf("name %q breaks %s", name, mcpName))
	}
	schema, _ := tool["inputSchema"].(map[string]any)
	if schema["type"] != "object" {
		problems = append(problems, "inputSchema.type is not \"object\"")
	}
	want := map[string]any{
		tooldef.LevelSafe:      map[string]any{"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true},
		tooldef.LevelModerate:  map[string]any{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false},
		tooldef.LevelDangerous: map[string]any{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false},
	}[def.Security.Level].(map[string]any)
	want["openWorldHint"] = slices.Contains([]string{"browser", "search", "api"}, def.Category) || def.Security.Network
	ann, _ := tool["annotations"].(map[string]any)
	problems = append(problems, onlyKeys("annotations", ann, "title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")...)
	for k, v := range want {
		if ann[k] != v {
			problems = append(problems, fmt.Sprintf("annotations.%s is %v, want %v", k, ann[k], v))
		}
	}
	if ann["title"] != tool["title"] || tool["title"] == "" {
		problems = append(problems, fmt.Sprintf("titles %v and %v should match and be set", tool["title"], ann["title"]))
	}
	return problems
}

// TestRenderSchemasCompile proves the schemas emitted for OpenAI, Anthropic
// and MCP are still valid JSON Schema that accept the same arguments.
func TestRenderSchemasCompile(t *testing.T) {
	schemaAt := map[string]func(map[string]any) any{
		FormatOpenAI:          func(m map[string]any) any { return m["function"].(map[string]any)["parameters"] },
		FormatOpenAIResponses: func(m map[string]any) any { return m["parameters"] },
		FormatAnthropic:       func(m map[string]any) any { return m["input_schema"] },
		FormatMCP:             func(m map[string]any) any { return m["inputSchema"] },
	}
	for _, tc := range renderCases() {
		all, err := RenderAll(tc.def)
		if err != nil {
			t.Fatal(err)
		}
		for format, at := range schemaAt {
			t.Run(tc.name+"/"+format, func(t *testing.T) {
				tool, err := jsonschema.UnmarshalJSON(bytes.NewReader(all[format]))
				if err != nil {
					t.Fatal(err)
				}
				rendered := at(tool.(map[string]any))
				sch := mustCompile(t, rendered)
				args, err := jsonschema.UnmarshalJSON(strings.NewReader(tc.sample))
				if err != nil {
					t.Fatal(err)
				}
				// A model in strict mode sends null for what it leaves out.
				if strict, _ := tool.(map[string]any)["strict"].(bool); strict || tool.(map[string]any)["function"] != nil && tool.(map[string]any)["function"].(map[string]any)["strict"] == true {
					fillNulls(args, rendered)
				}
				if err := sch.Validate(args); err != nil {
					t.Errorf("sample arguments rejected: %v", err)
				}
				original, err := jsonschema.UnmarshalJSON(bytes.NewReader(tc.def.Parameters))
				if err != nil {
					t.Fatal(err)
				}
				// The server drops those nulls before validating (invoke).
				tooldef.PlanArgs(original).Apply(args)
				if err := mustCompile(t, original).Validate(args); err != nil {
					t.Errorf("sample arguments rejected by the original schema: %v", err)
				}
			})
		}
	}
}

func mustCompile(t *testing.T, doc any) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const url = "mem://tool/parameters.json"
	if m, ok := doc.(map[string]any); ok {
		if id, ok := m["$id"].(string); ok {
			return compileAt(t, c, id, doc)
		}
	}
	return compileAt(t, c, url, doc)
}

func compileAt(t *testing.T, c *jsonschema.Compiler, url string, doc any) *jsonschema.Schema {
	t.Helper()
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("schema does not compile: %v", err)
	}
	return sch
}

func TestRenderErrors(t *testing.T) {
	long := strings.Repeat("a", 64)
	def := func(name, params string) tooldef.Definition {
		return tooldef.Definition{Name: name, Description: "d", Category: "code",
			Parameters: json.RawMessage(params), Security: tooldef.Security{Level: tooldef.LevelSafe}}
	}
	obj := `{"type":"object"}`
	tests := []struct {
		name    string
		def     tooldef.Definition
		format  string
		wantErr bool
	}{
		{"valid name", def("file_read", obj), FormatOpenAI, false},
		{"space in name", def("file read", obj), FormatOpenAI, true},
		{"empty name", def("", obj), FormatAnthropic, true},
		{"empty name mcp", def("", obj), FormatMCP, true},
		{"digit first openai", def("9lives", obj), FormatOpenAI, false},
		{"digit first gemini", def("9lives", obj), FormatGemini, true},
		{"dash gemini", def("file-read", obj), FormatGemini, false},
		{"dot anthropic", def("files.read", obj), FormatAnthropic, true},
		{"dot gemini", def("files.read", obj), FormatGemini, true},
		{"dot mcp", def("files.read", obj), FormatMCP, false},
		{"64 chars openai", def(long, obj), FormatOpenAIResponses, false},
		{"65 chars openai", def(long+"b", obj), FormatOpenAI, true},
		{"65 chars gemini", def(long+"b", obj), FormatGemini, true},
		{"65 chars mcp", def(long+"b", obj), FormatMCP, false},
		{"129 chars mcp", def(strings.Repeat("a", 129), obj), FormatMCP, true},
		{"unicode name", def("fichier_lu_é", obj), FormatMCP, true},
		{"unknown format", def("file_read", obj), "claude", true},
		{"empty format", def("file_read", obj), "", true},
		{"format case", def("file_read", obj), "OpenAI", true},
		{"parameters not an object", def("file_read", `[1]`), FormatOpenAI, true},
		{"parameters of type string", def("file_read", `{"type":"string"}`), FormatAnthropic, true},
		{"parameters not JSON", def("file_read", `{"type":`), FormatGemini, true},
		{"parameters with trailing data", def("file_read", `{} {}`), FormatGemini, true},
		{"no parameters", def("file_read", ``), FormatGemini, false},
		{"untyped parameters", def("file_read", `{"properties":{"a":{"type":"string"}}}`), FormatAnthropic, false},
		{"unknown level mcp", tooldef.Definition{Name: "x", Parameters: json.RawMessage(obj)}, FormatMCP, true},
		{"unknown level openai", tooldef.Definition{Name: "x", Parameters: json.RawMessage(obj)}, FormatOpenAI, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Render(tt.def, tt.format)
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if !json.Valid(out) {
					t.Fatalf("invalid JSON: %s", out)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error, got %s", out)
			}
			if !errors.Is(err, models.ErrInvalid) {
				t.Fatalf("error %v does not match models.ErrInvalid", err)
			}
			if out != nil {
				t.Errorf("output beside an error: %s", out)
			}
		})
	}

	t.Run("unknown format lists formats", func(t *testing.T) {
		_, err := Render(def("file_read", obj), "claude")
		if err == nil || !strings.Contains(err.Error(), `unknown format "claude"`) || !strings.Contains(err.Error(), "openai_responses") {
			t.Fatalf("error %v should name the format and the choices", err)
		}
	})
	t.Run("RenderAll fails on a name one format rejects", func(t *testing.T) {
		if _, err := RenderAll(def("9lives", obj)); !errors.Is(err, models.ErrInvalid) {
			t.Fatalf("want ErrInvalid, got %v", err)
		}
	})
}

func TestMCPAnnotations(t *testing.T) {
	tests := []struct {
		name, level, category string
		network               bool
		want                  mcpAnnotations
	}{
		{"file_read", tooldef.LevelSafe, "filesystem", false, mcpAnnotations{"File Read", true, false, true, false}},
		{"file_write", tooldef.LevelModerate, "filesystem", false, mcpAnnotations{"File Write", false, true, false, false}},
		{"shell_exec", tooldef.LevelDangerous, "shell", false, mcpAnnotations{"Shell Exec", false, true, false, false}},
		{"shell_fetch", tooldef.LevelDangerous, "shell", true, mcpAnnotations{"Shell Fetch", false, true, false, true}},
		{"browser_navigate", tooldef.LevelModerate, "browser", false, mcpAnnotations{"Browser Navigate", false, true, false, true}},
		{"web_search", tooldef.LevelSafe, "search", false, mcpAnnotations{"Web Search", true, false, true, true}},
		{"http_request", tooldef.LevelModerate, "api", false, mcpAnnotations{"Http Request", false, true, false, true}},
		{"code_execute", tooldef.LevelDangerous, "code", false, mcpAnnotations{"Code Execute", false, true, false, false}},
		{"get_v2_status", tooldef.LevelSafe, "api", false, mcpAnnotations{"Get V2 Status", true, false, true, true}},
		{"x", tooldef.LevelSafe, "code", false, mcpAnnotations{"X", true, false, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def := tooldef.Definition{Name: tt.name, Category: tt.category, Security: tooldef.Security{Level: tt.level, Network: tt.network},
				Parameters: json.RawMessage(`{"type":"object"}`)}
			raw, err := Render(def, FormatMCP)
			if err != nil {
				t.Fatal(err)
			}
			var got mcpTool
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if got.Annotations != tt.want || got.Title != tt.want.Title {
				t.Errorf("got %+v (title %q), want %+v", got.Annotations, got.Title, tt.want)
			}
		})
	}
}

// canonicalJSON re-encodes JSON with sorted keys and exact numbers, so two
// documents compare by content.
func canonicalJSON(t *testing.T, raw string) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("bad JSON %s: %v", raw, err)
	}
	out, err := marshalCompact(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestGeminiTransforms checks each JSON Schema construct Gemini cannot take
// as it is: the property x of the root becomes want.
// jsonTextNote is geminiJSONTextNote as it stands inside a JSON string.
var jsonTextNote = strings.Trim(jsonText(geminiJSONTextNote), `"`)

// geminiTransform is a schema construct and its Gemini rendering.
type geminiTransform struct {
	name   string
	x      string
	defs   string
	want   string
	wantIn string // when set, the whole parameters instead of x
}

// parameters is the tool's parameters: x as the property of a root, or
// wantIn itself.
func (tt geminiTransform) parameters() string {
	if tt.wantIn != "" {
		return tt.wantIn
	}
	defs := tt.defs
	if defs == "" {
		defs = `{}`
	}
	return fmt.Sprintf(`{"type":"object","properties":{"x":%s},"$defs":%s,"definitions":{"id":{"type":"string","description":"An id","pattern":"^u"}}}`, tt.x, defs)
}

func TestGeminiTransforms(t *testing.T) {
	for _, tt := range geminiTransforms() {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := Render(tooldef.Definition{Name: "t", Parameters: json.RawMessage(tt.parameters())}, FormatGemini)
			if err != nil {
				t.Fatal(err)
			}
			var fn struct {
				Parameters map[string]any `json:"parametersJsonSchema"`
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			if err := dec.Decode(&fn); err != nil {
				t.Fatal(err)
			}
			if fn.Parameters != nil {
				for _, p := range geminiViolations(fn.Parameters, "parameters") {
					t.Error(p)
				}
			}
			got := any(fn.Parameters)
			if tt.wantIn == "" {
				got = fn.Parameters["properties"].(map[string]any)["x"]
			}
			gotJSON, _ := marshalCompact(got)
			if g, w := canonicalJSON(t, string(gotJSON)), canonicalJSON(t, tt.want); g != w {
				t.Errorf("got  %s\nwant %s", g, w)
			}
		})
	}
}

func geminiTransforms() []geminiTransform {
	return []geminiTransform{
		{name: "plain string", x: `{"type":"string","minLength":1,"maxLength":9,"pattern":"^a"}`,
			want: `{"type":"string","minLength":1,"maxLength":9,"pattern":"^a"}`},
		{name: "nullable type array", x: `{"type":["string","null"],"description":"Note"}`,
			want: `{"type":["string","null"],"description":"Note"}`},
		{name: "null first", x: `{"type":["null","integer"]}`, want: `{"type":["integer","null"]}`},
		{name: "multi type", x: `{"type":["integer","string"],"minimum":1,"minLength":2,"description":"Id or slug"}`,
			want: `{"anyOf":[{"type":"integer","minimum":1},{"type":"string","minLength":2}],"description":"Id or slug"}`},
		{name: "multi type nullable", x: `{"type":["integer","boolean","null"]}`,
			want: `{"anyOf":[{"type":["integer","null"]},{"type":["boolean","null"]}]}`},
		{name: "multi type enum split", x: `{"type":["integer","string"],"enum":[1,"a"]}`,
			want: `{"anyOf":[{"type":"integer","description":"Allowed values: 1."},{"type":"string","enum":["a"]}]}`},
		{name: "const string", x: `{"const":"fixed"}`, want: `{"type":"string","enum":["fixed"]}`},
		{name: "const number", x: `{"const":3,"description":"Version"}`,
			want: `{"type":"integer","description":"Version. Must be 3."}`},
		{name: "const boolean typed", x: `{"type":"boolean","const":true}`,
			want: `{"type":"boolean","description":"Must be true."}`},
		{name: "const null", x: `{"const":null}`,
			want: `{"anyOf":[{"type":["string","null"]},{"type":["number","null"]},{"type":["boolean","null"]}]}`},
		{name: "integer enum", x: `{"type":"integer","enum":[1,2,3]}`,
			want: `{"type":"integer","description":"Allowed values: 1, 2, 3."}`},
		{name: "untyped number enum", x: `{"enum":[1,2.5]}`,
			want: `{"type":"number","description":"Allowed values: 1, 2.5."}`},
		{name: "string enum with null", x: `{"enum":["a","b",null]}`,
			want: `{"type":["string","null"],"enum":["a","b",null]}`},
		{name: "string enum drops the enum format", x: `{"type":"string","enum":["a"],"format":"enum"}`,
			want: `{"type":"string","enum":["a"]}`},
		{name: "oneOf", x: `{"oneOf":[{"type":"string"},{"type":"integer"}],"description":"Either"}`,
			want: `{"anyOf":[{"type":"string"},{"type":"integer"}],"description":"Either"}`},
		{name: "anyOf with null collapses", x: `{"anyOf":[{"$ref":"#/$defs/point"},{"type":"null"}],"description":"Where"}`,
			defs: `{"point":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"],"additionalProperties":false}}`,
			want: `{"type":["object","null"],"properties":{"x":{"type":"number"}},"required":["x"],"description":"Where. No other properties."}`},
		{name: "anyOf keeps branch notes", x: `{"anyOf":[{"type":"integer","enum":[1,2]},{"type":"null"}],"description":"Level"}`,
			want: `{"type":["integer","null"],"description":"Level. Allowed values: 1, 2."}`},
		{name: "ref with sibling", x: `{"$ref":"#/definitions/id","description":"Owner id"}`,
			defs: `null`,
			want: `{"type":"string","description":"Owner id","pattern":"^u"}`,
		},
		{name: "unresolvable ref", x: `{"$ref":"https://example.com/other.json"}`,
			want: `{"anyOf":[{"type":"string"},{"type":"number"},{"type":"boolean"}],"description":"Follows the schema https://example.com/other.json."}`},
		{name: "recursive ref", x: `{"$ref":"#/$defs/list"}`,
			defs: `{"list":{"type":"object","properties":{"head":{"type":"integer"},"tail":{"$ref":"#/$defs/list"}},"required":["head"]}}`,
			want: `{"type":"object","properties":{"head":{"type":"integer"},"tail":{"type":"string","description":"Recursive: has the same structure as list. ` + jsonTextNote + `"}},"required":["head"]}`},
		{name: "allOf objects merge", x: `{"allOf":[{"$ref":"#/$defs/base"},{"properties":{"b":{"type":"integer"}},"required":["b","a"]}],"description":"Both"}`,
			defs: `{"base":{"type":"object","properties":{"a":{"type":"string"}}}}`,
			want: `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["b","a"],"description":"Both"}`},
		{name: "allOf same scalar type merges", x: `{"allOf":[{"type":"string"},{"maxLength":3}]}`,
			want: `{"type":"string","maxLength":3}`},
		{name: "allOf mixed takes first", x: `{"allOf":[{"type":"string","minLength":1},{"type":"number"}]}`,
			want: `{"type":"string","minLength":1}`},
		{name: "exclusiveMinimum integer", x: `{"type":"integer","exclusiveMinimum":0}`, want: `{"type":"integer","minimum":1}`},
		{name: "exclusiveMinimum fraction integer", x: `{"type":"integer","exclusiveMinimum":2.5}`, want: `{"type":"integer","minimum":3}`},
		{name: "exclusiveMaximum integer", x: `{"type":"integer","exclusiveMaximum":10}`, want: `{"type":"integer","maximum":9}`},
		{name: "exclusiveMaximum negative fraction", x: `{"type":"integer","exclusiveMaximum":-1.5}`, want: `{"type":"integer","maximum":-2}`},
		{name: "exclusive number", x: `{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}`,
			want: `{"type":"number","minimum":0,"maximum":1,"description":"Must be greater than 0. Must be less than 1."}`},
		{name: "minimum tighter than exclusive", x: `{"type":"number","minimum":5,"exclusiveMinimum":2}`,
			want: `{"type":"number","minimum":5}`},
		{name: "examples", x: `{"type":"string","examples":["x","y"]}`, want: `{"type":"string","examples":["x"]}`},
		{name: "formats", x: `{"type":"object","properties":{"a":{"type":"string","format":"date-time"},"b":{"type":"string","format":"uri"},"c":{"type":"integer","format":"int64"}}}`,
			want: `{"type":"object","properties":{"a":{"type":"string","format":"date-time"},"b":{"type":"string","description":"Format: uri."},"c":{"type":"integer","format":"int64"}}}`},
		// Gemini refuses an OBJECT without properties: a free-form object is
		// asked for as JSON text, with its constraint in words.
		{name: "map object", x: `{"type":"object","additionalProperties":{"type":"string"},"maxProperties":9}`,
			want: `{"type":"string","description":"Each value: {\"type\":\"string\"}. ` + jsonTextNote + ` maxProperties: 9."}`},
		{name: "free-form object", x: `{"type":"object","description":"Extra fields","default":{"a":1}}`,
			want: `{"type":"string","description":"Extra fields. ` + jsonTextNote + ` Default: {\"a\":1}."}`},
		{name: "closed empty object", x: `{"type":"object","additionalProperties":false}`,
			want: `{"type":"string","description":"Must be empty. ` + jsonTextNote + `"}`},
		{name: "named properties and others", x: `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"}}`,
			want: `{"type":"object","properties":{"a":{"type":"string"}},"description":"Other properties: {\"type\":\"integer\"}."}`},
		{name: "array without items", x: `{"type":"array","maxItems":3}`,
			want: `{"type":"array","maxItems":3,"items":{"anyOf":[{"type":"string"},{"type":"number"},{"type":"boolean"}]}}`},
		{name: "tuple", x: `{"type":"array","prefixItems":[{"type":"number"},{"type":"string"}],"items":false}`,
			want: `{"type":"array","maxItems":2,"items":{"anyOf":[{"type":"number"},{"type":"string"}]}}`},
		{name: "unique and multiple", x: `{"type":"array","uniqueItems":true,"items":{"type":"number","multipleOf":0.5}}`,
			want: `{"type":"array","description":"Items must be unique.","items":{"type":"number","description":"Must be a multiple of 0.5."}}`},
		{name: "any value", x: `{"description":"Anything"}`,
			want: `{"anyOf":[{"type":"string"},{"type":"number"},{"type":"boolean"}],"description":"Anything"}`},
		{name: "inferred object", x: `{"properties":{"a":{"type":"string"},"gone":false},"required":["a","gone","missing"],"propertyOrdering":["gone","a"]}`,
			want: `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"propertyOrdering":["a"]}`},
		{name: "oneOf required only", x: `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"oneOf":[{"required":["a"]},{"required":["b"]}]}`,
			want: `{"type":"object","properties":{"a":{"type":"string"}, "b":{"type":"string"}},"description":"Provide exactly one of: a; b."}`},
		{name: "union distributes over parent", x: `{"type":"object","description":"Shape","properties":{"kind":{"type":"string"}},"anyOf":[{"properties":{"a":{"type":"integer"}}},{"properties":{"b":{"type":"boolean"}}}]}`,
			want: `{"anyOf":[{"type":"object","properties":{"kind":{"type":"string"},"a":{"type":"integer"}}},{"type":"object","properties":{"kind":{"type":"string"},"b":{"type":"boolean"}}}],"description":"Shape"}`},
		{name: "dropped keywords", x: `{"type":"string","$comment":"c","readOnly":true,"deprecated":true,"contentEncoding":"base64","title":"T"}`,
			want: `{"type":"string","title":"T"}`},
		{name: "default kept", x: `{"type":"integer","default":5,"description":"Count"}`, want: `{"type":"integer","default":5,"description":"Count"}`},
		// A root without properties is left out: Gemini refuses an OBJECT
		// with none.
		{name: "root is only required when defined", wantIn: `{"type":"object","properties":{},"required":["ghost"],"additionalProperties":false}`,
			want: `null`},
		{name: "root ref", wantIn: `{"$ref":"#/$defs/in","$defs":{"in":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}}`,
			want: `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`},
		{name: "root recursion", wantIn: `{"type":"object","properties":{"self":{"$ref":"#"}}}`,
			want: `{"type":"object","properties":{"self":{"type":"string","description":"Recursive: has the same structure as the whole input. ` + jsonTextNote + `"}}}`},
	}
}

func TestQualifiesStrict(t *testing.T) {
	obj := func(props, required string, extra string) string {
		return fmt.Sprintf(`{"type":"object","properties":%s,"required":%s,"additionalProperties":false%s}`, props, required, extra)
	}
	tests := []struct {
		name   string
		schema string
		want   bool
	}{
		{"all required", obj(`{"a":{"type":"string"}}`, `["a"]`, ""), true},
		{"no parameters", obj(`{}`, `[]`, ""), true},
		{"no properties keyword", `{"type":"object","additionalProperties":false}`, true},
		{"optional property", obj(`{"a":{"type":"string"},"b":{"type":"string"}}`, `["a"]`, ""), false},
		{"additionalProperties missing", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, false},
		{"additionalProperties true", `{"type":"object","properties":{},"additionalProperties":true}`, false},
		{"nullable instead of optional", obj(`{"a":{"type":["string","null"]}}`, `["a"]`, ""), true},
		{"nested object open", obj(`{"a":{"type":"object","properties":{"b":{"type":"string"}},"required":["b"]}}`, `["a"]`, ""), false},
		{"nested object closed", obj(`{"a":{"type":"object","properties":{"b":{"type":"string"}},"required":["b"],"additionalProperties":false}}`, `["a"]`, ""), true},
		{"array of open objects", obj(`{"a":{"type":"array","items":{"type":"object","properties":{"b":{"type":"string"}}}}}`, `["a"]`, ""), false},
		{"array without items", obj(`{"a":{"type":"array"}}`, `["a"]`, ""), false},
		{"anyOf branches", obj(`{"a":{"anyOf":[{"type":"string"},{"type":"object","properties":{},"additionalProperties":false}]}}`, `["a"]`, ""), true},
		{"anyOf open branch", obj(`{"a":{"anyOf":[{"type":"string"},{"type":"object","properties":{}}]}}`, `["a"]`, ""), false},
		{"root anyOf", obj(`{"a":{"type":"string"}}`, `["a"]`, `,"anyOf":[{"required":["a"]}]`), false},
		{"oneOf", obj(`{"a":{"oneOf":[{"type":"string"},{"type":"integer"}]}}`, `["a"]`, ""), false},
		{"allOf", obj(`{"a":{"allOf":[{"type":"string"}]}}`, `["a"]`, ""), false},
		{"not", obj(`{"a":{"type":"string","not":{"const":"x"}}}`, `["a"]`, ""), false},
		{"if then", obj(`{"a":{"type":"string"}}`, `["a"]`, `,"if":{},"then":{}`), false},
		{"dependentRequired", obj(`{"a":{"type":"string"}}`, `["a"]`, `,"dependentRequired":{"a":[]}`), false},
		{"patternProperties", obj(`{"a":{"type":"string"}}`, `["a"]`, `,"patternProperties":{"^x":{}}`), false},
		{"default", obj(`{"a":{"type":"string","default":"x"}}`, `["a"]`, ""), false},
		{"minLength", obj(`{"a":{"type":"string","minLength":1}}`, `["a"]`, ""), false},
		{"supported constraints", obj(`{"a":{"type":"string","pattern":"^a","format":"email"},"n":{"type":"number","minimum":0,"exclusiveMaximum":1,"multipleOf":0.1},"l":{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3}}`, `["a","n","l"]`, ""), true},
		{"unsupported format", obj(`{"a":{"type":"string","format":"uri"}}`, `["a"]`, ""), false},
		{"enum and const", obj(`{"a":{"type":"string","enum":["x","y"]},"b":{"type":"integer","const":1}}`, `["a","b"]`, ""), true},
		{"untyped property", obj(`{"a":{"description":"anything"}}`, `["a"]`, ""), false},
		{"boolean schema", obj(`{"a":true}`, `["a"]`, ""), false},
		{"defs and refs", obj(`{"a":{"$ref":"#/$defs/p"}}`, `["a"]`, `,"$defs":{"p":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"],"additionalProperties":false}}`), true},
		{"open def", obj(`{"a":{"$ref":"#/$defs/p"}}`, `["a"]`, `,"$defs":{"p":{"type":"object","properties":{"x":{"type":"number"}}}}`), false},
		{"ref with sibling", obj(`{"a":{"$ref":"#/$defs/p","description":"d"}}`, `["a"]`, `,"$defs":{"p":{"type":"string"}}`), false},
		{"remote ref", obj(`{"a":{"$ref":"https://example.com/s.json"}}`, `["a"]`, ""), false},
		{"required names unknown", obj(`{"a":{"type":"string"}}`, `["a","b"]`, ""), false},
		{"title allowed", obj(`{"a":{"type":"string","title":"A"}}`, `["a"]`, `,"title":"Input"`), true},
		{"too deep", deepObject(11), false},
		{"deep enough", deepObject(9), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			schema, err := parseParameters(tooldef.Definition{Name: "t", Parameters: json.RawMessage(tt.schema)})
			if err != nil {
				t.Fatal(err)
			}
			if got := qualifiesStrict(schema); got != tt.want {
				t.Errorf("qualifiesStrict = %v, want %v for %s", got, tt.want, tt.schema)
			}
			// The independent checker must agree whenever strict is claimed.
			if qualifiesStrict(schema) {
				if v := strictViolations(schema, "#", true); len(v) > 0 {
					t.Errorf("claimed strict but %v", v)
				}
			}
		})
	}
}

// deepObject nests closed objects n levels below the root.
func deepObject(n int) string {
	s := `{"type":"string"}`
	for range n {
		s = fmt.Sprintf(`{"type":"object","properties":{"a":%s},"required":["a"],"additionalProperties":false}`, s)
	}
	return s
}

func TestRenderDoesNotModifyInput(t *testing.T) {
	for _, tc := range renderCases() {
		before := string(tc.def.Parameters)
		schema, err := parseParameters(tc.def)
		if err != nil {
			t.Fatal(err)
		}
		snapshot, _ := marshalCompact(schema)
		for _, format := range table {
			if _, err := render(tc.def, schema, format); err != nil {
				t.Fatal(err)
			}
		}
		after, _ := marshalCompact(schema)
		if !bytes.Equal(snapshot, after) || string(tc.def.Parameters) != before {
			t.Errorf("%s: rendering modified the parsed schema", tc.name)
		}
	}
}

// TestGeminiInlineBounded feeds a schema whose $refs double at every level,
// which would inline to 2^40 subschemas without a bound.
func TestGeminiInlineBounded(t *testing.T) {
	var defs []string
	for i := range 40 {
		defs = append(defs, fmt.Sprintf(`"d%d":{"type":"object","properties":{"l":{"$ref":"#/$defs/d%d"},"r":{"$ref":"#/$defs/d%d"}}}`, i, i+1, i+1))
	}
	defs = append(defs, `"d40":{"type":"string"}`)
	params := `{"type":"object","properties":{"x":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(defs, ",") + `}}`
	raw, err := Render(tooldef.Definition{Name: "t", Parameters: json.RawMessage(params)}, FormatGemini)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 10<<20 {
		t.Fatalf("output of %d bytes is not bounded", len(raw))
	}
	var fn map[string]any
	if err := json.Unmarshal(raw, &fn); err != nil {
		t.Fatal(err)
	}
	for _, p := range checkGemini(fn) {
		t.Error(p)
	}
}

// TestRuleCheckers makes sure the checkers above catch what they look for,
// so a passing TestRenderRules means something.
func TestRuleCheckers(t *testing.T) {
	bad := func(raw string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, raw := range []string{
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`,
		`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`,
		`{"type":"object","properties":{"a":{"type":"object","properties":{}}},"required":["a"],"additionalProperties":false}`,
		`{"type":"object","properties":{},"additionalProperties":false,"anyOf":[]}`,
		`{"type":"object","properties":{"a":{"oneOf":[]}},"required":["a"],"additionalProperties":false}`,
	} {
		if len(strictViolations(bad(raw), "#", true)) == 0 {
			t.Errorf("strictViolations missed a problem in %s", raw)
		}
	}
	for _, raw := range []string{
		`{"type":["string","integer"]}`,
		`{"type":"string","nullable":true}`,
		`{"type":"string","enum":["a",null]}`,
		`{"type":"object","additionalProperties":false}`,
		`{"$ref":"#/$defs/a"}`,
		`{"type":"string","const":"a"}`,
		`{"type":"integer","enum":[1]}`,
		`{"type":"array"}`,
		`{"type":"string","format":"uri"}`,
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}`,
		`{"type":"string","example":"a"}`,
		`{"description":"no type"}`,
	} {
		if len(geminiViolations(bad(raw), "s")) == 0 {
			t.Errorf("geminiViolations missed a problem in %s", raw)
		}
	}
}

// rootCombinatorsIn lists the combinators OpenAI and Anthropic refuse at
// the top level of a tool's schema (both answer 400).
func rootCombinatorsIn(at string, schema map[string]any) []string {
	var out []string
	for _, k := range []string{"oneOf", "anyOf", "allOf", "not", "enum"} {
		if _, ok := schema[k]; ok {
			out = append(out, at+" has "+k+" at the top level")
		}
	}
	return out
}

// TestPlainRoot: root combinators, which OpenAI and Anthropic refuse, become
// a plain object whose description states the constraint; the fields of
// the alternatives join the root's.
func TestPlainRoot(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"no combinator unchanged", `{"type":"object","properties":{"a":{"type":"string"}}}`,
			`{"type":"object","properties":{"a":{"type":"string"}}}`},
		{"anyOf of required", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"anyOf":[{"required":["a"]},{"required":["b"]}]}`,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"description":"The input must have at least one of: a; or b."}`},
		{"oneOf with fields", `{"oneOf":[{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]},{"properties":{"slug":{"type":"string"}},"required":["slug"],"description":"By slug."}]}`,
			`{"type":"object","properties":{"id":{"type":"integer"},"slug":{"type":"string"}},"description":"The input must have exactly one of: id; or slug (By slug)."}`},
		{"required by every branch stays required", `{"oneOf":[{"properties":{"k":{"type":"string"},"a":{}},"required":["k","a"]},{"properties":{"k":{"type":"string"},"b":{}},"required":["k","b"]}]}`,
			`{"type":"object","properties":{"k":{"type":"string"},"a":{},"b":{}},"required":["k"],"description":"The input must have exactly one of: k and a; or k and b."}`},
		{"allOf merges", `{"type":"object","description":"Both.","allOf":[{"properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"integer"}}}]}`,
			`{"type":"object","description":"Both.","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a"]}`},
		{"allOf of a reference is stated", `{"type":"object","allOf":[{"$ref":"#/$defs/x"}],"$defs":{"x":{"type":"object"}}}`,
			`{"type":"object","$defs":{"x":{"type":"object"}},"description":"The input must also match: {\"$ref\":\"#/$defs/x\"}."}`},
		{"not is stated", `{"type":"object","properties":{"a":{}},"not":{"required":["a"]}}`,
			`{"type":"object","properties":{"a":{}},"description":"The input must not match: {\"required\":[\"a\"]}."}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var in map[string]any
			if err := json.Unmarshal([]byte(tc.in), &in); err != nil {
				t.Fatal(err)
			}
			before, _ := json.Marshal(in)
			out := plainRoot(in)
			if after, _ := json.Marshal(in); string(after) != string(before) {
				t.Errorf("the input was modified: %s", after)
			}
			if p := rootCombinatorsIn("parameters", out); len(p) > 0 {
				t.Errorf("still refused: %v", p)
			}
			got, _ := marshalCompact(out)
			if g, w := canonicalJSON(t, string(got)), canonicalJSON(t, tc.want); g != w {
				t.Errorf("got  %s\nwant %s", g, w)
			}
		})
	}
}

// TestMCPPlainRoot: MCP's inputSchema gets the plain root OpenAI and
// Anthropic get, since agent frameworks pass it on to those APIs (and the
// Vercel AI SDK closes the root, which leaves a root oneOf unsatisfiable);
// combinators below the root stay, as does everything else.
func TestMCPPlainRoot(t *testing.T) {
	nested := `"mode":{"oneOf":[{"type":"string"},{"type":"integer"}]}`
	cases := []struct{ name, params, note string }{
		{"oneOf", `{"type":"object","additionalProperties":false,"properties":{` + nested + `},"oneOf":[
			{"properties":{"id":{"type":"integer"}},"required":["id"]},
			{"properties":{"slug":{"type":"string"}},"required":["slug"]}]}`,
			"The input must have exactly one of: id; or slug."},
		{"anyOf", `{"type":"object","properties":{"name":{"type":"string"},"content":{"type":"string"},` + nested + `},
			"anyOf":[{"required":["name"]},{"required":["content"]}]}`,
			"The input must have at least one of: name; or content."},
		{"allOf", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{` + nested + `},
			"allOf":[{"properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"integer"}}}]}`,
			""},
		{"not", `{"type":"object","properties":{"a":{"type":"string"},` + nested + `},"not":{"required":["a"]}}`,
			`The input must not match: {"required":["a"]}.`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			def := tooldef.Definition{Name: "pick", Description: "Pick one.", Parameters: json.RawMessage(tc.params),
				Security: tooldef.Security{Level: tooldef.LevelSafe}}
			all, err := RenderAll(def)
			if err != nil {
				t.Fatal(err)
			}
			var mcp, anthropic, openai map[string]any
			for format, v := range map[string]*map[string]any{FormatMCP: &mcp, FormatAnthropic: &anthropic, FormatOpenAI: &openai} {
				if err := json.Unmarshal(all[format], v); err != nil {
					t.Fatal(err)
				}
			}
			schema, _ := mcp["inputSchema"].(map[string]any)
			for _, p := range rootCombinatorsIn("inputSchema", schema) {
				t.Error(p)
			}
			if got, want := canonicalJSON(t, string(mustMarshal(t, schema))), canonicalJSON(t, string(mustMarshal(t, anthropic["input_schema"]))); got != want {
				t.Errorf("inputSchema differs from Anthropic's input_schema:\n%s\n%s", got, want)
			}
			openaiProps, _ := openai["function"].(map[string]any)["parameters"].(map[string]any)["properties"].(map[string]any)
			mcpProps, _ := schema["properties"].(map[string]any)
			if got, want := slices.Sorted(maps.Keys(mcpProps)), slices.Sorted(maps.Keys(openaiProps)); !slices.Equal(got, want) {
				t.Errorf("inputSchema has properties %v, OpenAI's parameters %v", got, want)
			}
			if mode, _ := mcpProps["mode"].(map[string]any); mode["oneOf"] == nil {
				t.Errorf("a combinator below the root was lost: %v", mcpProps["mode"])
			}
			if d, _ := schema["description"].(string); !strings.Contains(d, tc.note) {
				t.Errorf("inputSchema's description %q does not state %q", d, tc.note)
			}
			if _, ok := schema["$schema"]; ok {
				t.Error("inputSchema keeps $schema")
			}
			if p := checkMCP(mcp, def); len(p) > 0 {
				t.Error(p)
			}
		})
	}
}

// TestStrictLimits: each size limit of OpenAI's strict mode, just within
// and just past its bound.
func TestStrictLimits(t *testing.T) {
	closed := func(props map[string]any) map[string]any {
		names := slices.Sorted(maps.Keys(props))
		req := make([]any, len(names))
		for i, n := range names {
			req[i] = n
		}
		return map[string]any{"type": "object", "properties": props, "required": req, "additionalProperties": false}
	}
	manyProps := func(n int) map[string]any {
		props := map[string]any{}
		for i := range n {
			props[fmt.Sprintf("p%04d", i)] = map[string]any{"type": "string"}
		}
		return closed(props)
	}
	enumOf := func(n, size int) map[string]any {
		values := make([]any, n)
		for i := range values {
			v := fmt.Sprintf("%0*d", size, i)
			values[i] = v
		}
		return closed(map[string]any{"e": map[string]any{"type": "string", "enum": values}})
	}
	deep := func(n int) map[string]any {
		var s map[string]any
		if err := json.Unmarshal([]byte(deepObject(n)), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	longNames := func(total int) map[string]any {
		props := map[string]any{}
		for i := 0; total > 0; i++ {
			n := min(total, 1000)
			if rest := total - n; rest > 0 && rest < 4 {
				n -= 4 // the last name keeps room for its number
			}
			name := fmt.Sprintf("%0*d", n, i)
			props[name] = map[string]any{"type": "boolean"}
			total -= n
		}
		return closed(props)
	}
	cases := []struct {
		limit  string
		schema map[string]any
		want   bool
	}{
		{"5000 properties", manyProps(strictMaxProperties), true},
		{"5001 properties", manyProps(strictMaxProperties + 1), false},
		{"10 levels", deep(strictMaxDepth), true},
		{"11 levels", deep(strictMaxDepth + 1), false},
		{"1000 enum values", enumOf(strictMaxEnumValues, 4), true},
		{"1001 enum values", enumOf(strictMaxEnumValues+1, 4), false},
		{"120000 characters of names", longNames(strictMaxChars - 1), true},
		{"120001 characters of names", longNames(strictMaxChars + 1), false},
		{"250 long enum values (18,000 characters)", enumOf(strictLargeEnum, 72), true},
		{"251 enum values of 15,000 characters", enumOf(strictLargeEnum+1, strictLargeEnumChars/(strictLargeEnum+1)), true},
		{"300 enum values of 18,000 characters", enumOf(300, 60), false},
	}
	for _, tc := range cases {
		t.Run(tc.limit, func(t *testing.T) {
			if got := qualifiesStrict(tc.schema); got != tc.want {
				t.Errorf("qualifiesStrict = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPropertyNames: a property name some provider refuses is a problem
// at its pointer, naming the formats; names every provider takes pass, and
// enum values or required lists are data, not names.
func TestPropertyNames(t *testing.T) {
	cases := []struct {
		name, schema string
		want         []string // pointers of the problems
	}{
		{"snake_case passes", `{"type":"object","properties":{"path":{"type":"string"},"max_bytes_2":{"type":"integer"}}}`, nil},
		{"non-ASCII letter", `{"type":"object","properties":{"emoji_ü":{"type":"string"}}}`, []string{"/parameters/properties/emoji_ü"}},
		{"hyphen: Gemini only", `{"type":"object","properties":{"max-results":{"type":"integer"}}}`, []string{"/parameters/properties/max-results"}},
		{"space", `{"type":"object","properties":{"two words":{}}}`, []string{"/parameters/properties/two words"}},
		{"too long for Anthropic", `{"type":"object","properties":{"` + strings.Repeat("a", 65) + `":{}}}`, []string{"/parameters/properties/" + strings.Repeat("a", 65)}},
		{"nested in items and $defs", `{"type":"object","properties":{"rows":{"type":"array","items":{"type":"object","properties":{"a/b":{}}}},"ref":{"$ref":"#/$defs/d"}},"$defs":{"d":{"type":"object","properties":{"é":{}}}}}`,
			[]string{"/parameters/$defs/d/properties/é", "/parameters/properties/rows/items/properties/a~1b"}},
		{"data is not names", `{"type":"object","properties":{"kind":{"type":"string","enum":["a-b","ü"],"default":"a-b"}},"required":["kind"]}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RenderAll(tooldef.Definition{Name: "t", Description: "d", Security: tooldef.Security{Level: tooldef.LevelSafe},
				Parameters: json.RawMessage(tc.schema)})
			var ve *models.ValidationError
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.As(err, &ve) {
				t.Fatalf("want a validation error, got %v", err)
			}
			var got []string
			for _, p := range ve.Problems {
				got = append(got, p.Pointer)
				if !strings.Contains(p.Message, "gemini") && !strings.Contains(p.Message, "anthropic") {
					t.Errorf("%s: %q names no format", p.Pointer, p.Message)
				}
				if tc.name == "hyphen: Gemini only" && strings.Contains(p.Message, "anthropic") {
					t.Errorf("%q: Anthropic takes a hyphen", p.Message)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems at %v, want %v", got, tc.want)
			}
		})
	}
}

// fillNulls sets, in place, every required property the arguments lack to
// null, as a model in OpenAI's strict mode does for the optional fields it
// leaves out (strict renderings list every property as required).
func fillNulls(args, schema any) {
	s, _ := schema.(map[string]any)
	if list, ok := args.([]any); ok && s != nil {
		for _, v := range list {
			fillNulls(v, s["items"])
		}
		return
	}
	a, ok := args.(map[string]any)
	if !ok || s == nil {
		return
	}
	props, _ := s["properties"].(map[string]any)
	for _, r := range stringList(s["required"]) {
		if _, has := a[r]; !has {
			a[r] = nil
		}
	}
	for name, v := range a {
		fillNulls(v, props[name])
	}
}

// TestDeferred: defer_loading is written into any compact object, and
// anything else is left as it is.
func TestDeferred(t *testing.T) {
	cases := map[string]string{
		`{"name":"a","input_schema":{}}`: `{"name":"a","input_schema":{},"defer_loading":true}`,
		`{}`:                             `{"defer_loading":true}`,
		"{\"name\":\"a\"}\n":             `{"name":"a","defer_loading":true}`,
		` {"name":"a"}`:                  `{"defer_loading":true,"name":"a"}`,
		`[1]`:                            `[1]`,
		``:                               ``,
		`{`:                              `{`,
	}
	for in, want := range cases {
		got := string(Deferred(json.RawMessage(in)))
		if got != want {
			t.Errorf("Deferred(%q) = %q, want %q", in, got, want)
		}
		if want != in && !json.Valid([]byte(got)) {
			t.Errorf("Deferred(%q) = %q, not JSON", in, got)
		}
	}
	refs := ToolReferences([]string{"file_read", "file_list"})
	if raw, _ := json.Marshal(refs); string(raw) != `[{"type":"tool_reference","tool_name":"file_read"},{"type":"tool_reference","tool_name":"file_list"}]` {
		t.Errorf("references: %s", raw)
	}
	var search map[string]any
	if err := json.Unmarshal(AnthropicSearchTool(), &search); err != nil || search["name"] != SearchToolName {
		t.Errorf("search tool: %v %v", err, search)
	}
}
