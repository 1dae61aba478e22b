package tooldef_test

import (
	"encoding/json"
	"testing"

	"toolbelt/services/catalog"
	"toolbelt/services/formats"
	"toolbelt/services/tooldef"
)

// FuzzValidateDefinition: no definition, however broken, panics the
// validator, and what it accepts renders in every format.
func FuzzValidateDefinition(f *testing.F) {
	defs, _ := catalog.BuiltinDefinitions()
	for _, d := range defs {
		raw, _ := json.Marshal(d)
		f.Add(raw)
	}
	f.Add([]byte(`{"name":"x","parameters":{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"$ref":"#/$defs/a"}}}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var def tooldef.Definition
		if json.Unmarshal(raw, &def) != nil {
			return
		}
		tooldef.Normalize(&def)
		if _, ps := tooldef.Validate(&def, func(string) bool { return true }); len(ps) == 0 {
			if _, err := formats.RenderAll(def); err != nil {
				t.Fatalf("valid definition does not render: %v", err)
			}
		}
	})
}
