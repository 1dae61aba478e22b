package tooldef

import (
	"encoding/json"
	"strings"
	"testing"

	"toolbelt/models"
)

// TestPlanNulls: a null for an optional field that does not take null is
// the field left out, at any depth; a null a field takes, or one for a
// required field, stays for validation to judge.
func TestPlanArgs(t *testing.T) {
	schema := `{"type":"object","required":["q"],"properties":{
		"q":{"type":"string"},
		"limit":{"type":"integer"},
		"note":{"type":["string","null"]},
		"mode":{"enum":["a",null]},
		"either":{"anyOf":[{"type":"string"},{"type":"null"}]},
		"filter":{"type":"object","properties":{"tag":{"type":"string"},"since":{"type":"string"}},"required":["tag"]},
		"rows":{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"label":{"type":"string"}}}}
	}}`
	cases := []struct{ name, args, want string }{
		{"optional null dropped", `{"q":"x","limit":null}`, `{"q":"x"}`},
		{"required null kept", `{"q":null}`, `{"q":null}`},
		{"nullable fields keep null", `{"q":"x","note":null,"mode":null,"either":null}`, `{"q":"x","note":null,"mode":null,"either":null}`},
		{"nested object", `{"q":"x","filter":{"tag":null,"since":null}}`, `{"q":"x","filter":{"tag":null}}`},
		{"array items", `{"q":"x","rows":[{"id":1,"label":null},{"id":null}]}`, `{"q":"x","rows":[{"id":1},{}]}`},
		{"a null object field", `{"q":"x","filter":null}`, `{"q":"x"}`},
		{"unknown fields untouched", `{"q":"x","extra":null}`, `{"q":"x","extra":null}`},
	}
	checkPlan(t, schema, cases)
	// A root whose properties are in combinator branches: the strict
	// renderings merge them into the root, each optional.
	var union any
	_ = json.Unmarshal([]byte(`{"type":"object","anyOf":[{"properties":{"path":{"type":"string"}},"required":["path"]},
		{"properties":{"url":{"type":"string"}},"required":["url"]}]}`), &union)
	var args any
	_ = json.Unmarshal([]byte(`{"path":"a","url":null}`), &args)
	PlanArgs(union).Apply(args)
	if got, _ := json.Marshal(args); string(got) != `{"path":"a"}` {
		t.Errorf("root branches: got %s", got)
	}
	var empty any
	if PlanArgs(map[string]any{"type": "object"}) != nil {
		t.Error("a free-form root has a plan: the arguments are never text")
	}
	_ = json.Unmarshal([]byte(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`), &empty)
	if PlanArgs(empty) != nil {
		t.Error("a schema without optional fields has a plan")
	}
}

// TestPlanArgsJSONText: a string holding a JSON object where the schema
// takes an object and no string (a free-form object, which the Gemini
// rendering asks for as JSON text) is that object, at any depth and
// through local $refs, recursive ones too; anything else stays as sent,
// for validation to judge.
func TestPlanArgsJSONText(t *testing.T) {
	schema := `{"type":"object","properties":{
		"meta":{"type":"object"},
		"headers":{"type":"object","additionalProperties":{"type":"string"}},
		"maybe":{"type":["object","null"]},
		"either":{"type":["object","string"]},
		"note":{"type":"string"},
		"rows":{"type":"array","items":{"type":"object"}},
		"tree":{"$ref":"#/$defs/node"}
	},"$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},"child":{"$ref":"#/$defs/node"}}}}}`
	cases := []struct{ name, args, want string }{
		{"free-form object", `{"meta":"{\"a\":1}"}`, `{"meta":{"a":1}}`},
		{"map of strings", `{"headers":"{\"Accept\":\"text/plain\"}"}`, `{"headers":{"Accept":"text/plain"}}`},
		{"an object stays", `{"meta":{"a":1}}`, `{"meta":{"a":1}}`},
		{"nullable object", `{"maybe":"{}"}`, `{"maybe":{}}`},
		{"a schema that takes strings keeps them", `{"either":"{\"a\":1}","note":"{\"a\":1}"}`, `{"either":"{\"a\":1}","note":"{\"a\":1}"}`},
		{"array items", `{"rows":["{\"k\":\"v\"}",{"k":2}]}`, `{"rows":[{"k":"v"},{"k":2}]}`},
		{"recursive ref", `{"tree":{"name":"a","child":"{\"name\":\"b\",\"child\":{\"name\":\"c\"}}"}}`,
			`{"tree":{"name":"a","child":{"name":"b","child":{"name":"c"}}}}`},
		{"not JSON stays", `{"meta":"a=1"}`, `{"meta":"a=1"}`},
		{"JSON but not an object stays", `{"meta":"[1,2]"}`, `{"meta":"[1,2]"}`},
		{"trailing garbage stays", `{"meta":"{} x"}`, `{"meta":"{} x"}`},
	}
	checkPlan(t, schema, cases)
}

// checkPlan applies the plan of schema to each case's args and compares
// the outcome with want.
func checkPlan(t *testing.T, schema string, cases []struct{ name, args, want string }) {
	t.Helper()
	var doc any
	if err := json.Unmarshal([]byte(schema), &doc); err != nil {
		t.Fatal(err)
	}
	plan := PlanArgs(doc)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var args any
			if err := json.Unmarshal([]byte(tc.args), &args); err != nil {
				t.Fatal(err)
			}
			plan.Apply(args)
			got, _ := json.Marshal(args)
			var want any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if w, _ := json.Marshal(want); string(got) != string(w) {
				t.Errorf("got %s, want %s", got, w)
			}
		})
	}
}

// TestParametersJSONProblems: a schema typed by a person gets its JSON
// mistakes located by line and column, text after the closing brace is
// refused (it was ignored), and a misspelt type name gets the nearest
// real one, wherever it is nested, but a property named "type" is not
// taken for one.
func TestParametersJSONProblems(t *testing.T) {
	for _, tc := range []struct {
		name, schema  string
		pointer, want string
	}{
		{"trailing comma", "{\n  \"type\": \"object\",\n  \"properties\": {\"a\": {\"type\": \"string\"},\n}\n}", "/parameters",
			"invalid character '}' looking for beginning of object key string at line 4, column 1"},
		{"not closed", "{\n  \"type\": \"object\",\n  \"properties\": {", "/parameters", "ends at line 3, column 18 before the JSON does"},
		{"columns count characters", "{\"description\": \"café\", \"type\": \"object\" x}", "/parameters", "invalid character 'x' after object key:value pair at line 1, column 42"},
		{"text after the schema", "{\"type\": \"object\"}\n}", "/parameters", "more follows the schema's closing brace at line 2, column 1"},
		{"misspelt type", `{"type": "object", "properties": {"name": {"type": "strng"}}}`, "/parameters/properties/name/type",
			`"strng" is not a JSON Schema type: did you mean "string"?`},
		{"in a list of types", `{"type": "object", "properties": {"n": {"type": ["nul", "integer"]}}}`, "/parameters/properties/n/type/0", `did you mean "null"?`},
		{"nested in items", `{"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "Integer"}}}}`, "/parameters/properties/xs/items/type",
			`did you mean "integer"?`},
		{"far from any type", `{"type": "object", "properties": {"d": {"type": "datetime"}}}`, "/parameters/properties/d/type", `"datetime" is not a JSON Schema type (types:`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps models.Problems
			validateParameters(json.RawMessage(tc.schema), &ps)
			for _, p := range ps {
				if p.Pointer == tc.pointer && strings.Contains(p.Message, tc.want) {
					return
				}
			}
			t.Errorf("problems %+v, want one at %s containing %q", ps, tc.pointer, tc.want)
		})
	}
	// A property called "type" is a property, not a type name.
	var ps models.Problems
	if validateParameters(json.RawMessage(`{"type": "object", "properties": {"type": {"type": "string"}}}`), &ps); len(ps) != 0 {
		t.Errorf("a property named type: %+v", ps)
	}
}
