package tooldef

import (
	"encoding/json"
	"testing"
)

// TestPlanNulls: a null for an optional field that does not take null is
// the field left out, at any depth; a null a field takes, or one for a
// required field, stays for validation to judge.
func TestPlanNulls(t *testing.T) {
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
	var doc any
	if err := json.Unmarshal([]byte(schema), &doc); err != nil {
		t.Fatal(err)
	}
	plan := PlanNulls(doc)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var args any
			if err := json.Unmarshal([]byte(tc.args), &args); err != nil {
				t.Fatal(err)
			}
			plan.Apply(args)
			got, _ := json.Marshal(args)
			var want any
			_ = json.Unmarshal([]byte(tc.want), &want)
			if w, _ := json.Marshal(want); string(got) != string(w) {
				t.Errorf("got %s, want %s", got, w)
			}
		})
	}
	var empty any
	_ = json.Unmarshal([]byte(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`), &empty)
	if PlanNulls(empty) != nil {
		t.Error("a schema without optional fields has a plan")
	}
}
