package upstream

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestDraft2020AgreesWithTheOlderDraft: each schema, validated as the
// draft it names and converted to 2020-12, accepts and refuses the same
// instances.
func TestDraft2020AgreesWithTheOlderDraft(t *testing.T) {
	cases := []struct {
		schema    string
		instances []string
	}{
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"message":{"type":"string"}},"required":["message"],"additionalProperties":false}`,
			[]string{`{"message":"hi"}`, `{}`, `{"message":1}`, `{"message":"hi","x":1}`}},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"pair":{"type":"array","items":[{"type":"string"},{"type":"number"}],"additionalItems":false}}}`,
			[]string{`{"pair":["a",1]}`, `{"pair":[1,"a"]}`, `{"pair":["a",1,2]}`, `{"pair":["a"]}`}},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"list":{"type":"array","items":{"type":"integer"}}}}`,
			[]string{`{"list":[1,2]}`, `{"list":[1,"x"]}`}},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","dependencies":{"card":["billing"],"mode":{"properties":{"level":{"minimum":1}}}}}`,
			[]string{`{"card":1}`, `{"card":1,"billing":2}`, `{"mode":"x","level":0}`, `{"mode":"x","level":3}`, `{"level":0}`}},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"type":"number","minimum":0,"exclusiveMinimum":true,"maximum":10,"exclusiveMaximum":false}}}`,
			[]string{`{"n":0}`, `{"n":0.5}`, `{"n":10}`, `{"n":10.5}`}},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"pt":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}},"type":"object","properties":{"at":{"$ref":"#/definitions/pt"},"any":{"anyOf":[{"$ref":"#/definitions/pt"},{"type":"null"}]}}}`,
			[]string{`{"at":{"x":1}}`, `{"at":{}}`, `{"any":null}`, `{"any":{"y":1}}`}},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"items":{"type":"array","items":[{"type":"string"}]},"dependencies":{"type":"string"}}}`,
			[]string{`{"items":["a",2]}`, `{"items":[1]}`, `{"dependencies":"x"}`, `{"dependencies":1}`}},
	}
	for i, tc := range cases {
		var schema any
		if err := json.Unmarshal([]byte(tc.schema), &schema); err != nil {
			t.Fatal(err)
		}
		older := compile(t, fmt.Sprint("older", i), schema)
		converted := draft2020(schema)
		if _, ok := converted.(map[string]any)["$schema"]; ok {
			t.Errorf("case %d: $schema kept", i)
		}
		newer := compile(t, fmt.Sprint("newer", i), converted)
		for _, in := range tc.instances {
			v, err := jsonschema.UnmarshalJSON(strings.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			a, b := older.Validate(v) == nil, newer.Validate(v) == nil
			if a != b {
				raw, _ := json.Marshal(converted)
				t.Errorf("case %d, %s: the older draft says %v, 2020-12 %v (converted %s)", i, in, a, b, raw)
			}
		}
	}
	// A schema naming no draft is left as it is.
	plain := map[string]any{"type": "object", "items": []any{map[string]any{"type": "string"}}}
	if got := draft2020(plain).(map[string]any); got["items"] == nil || got["prefixItems"] != nil {
		t.Errorf("a schema naming no draft was changed: %v", got)
	}
}

func compile(t *testing.T, name string, schema any) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	url := "mem:///" + name + ".json"
	if err := c.AddResource(url, schema); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	return s
}
