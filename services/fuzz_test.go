package services

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzCheckPath: a path the guard accepts never leaves the work directory
// once joined and cleaned.
func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"a.txt", "../x", "/etc/passwd", "a/../../b", "..\\\\x", "a/./b", "....//x", "C:\\\\x", "%2e%2e/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if checkPath(p, nil) != "" {
			return
		}
		joined := filepath.Clean(filepath.Join("/work/root", p))
		if joined != "/work/root" && !strings.HasPrefix(joined, "/work/root/") {
			t.Fatalf("accepted %q, which resolves to %s", p, joined)
		}
	})
}

// FuzzValidateDefinition: no definition, however broken, panics the
// validator, and what it accepts renders in every format.
func FuzzValidateDefinition(f *testing.F) {
	defs, _ := BuiltinDefinitions()
	for _, d := range defs {
		raw, _ := json.Marshal(d)
		f.Add(raw)
	}
	f.Add([]byte(`{"name":"x","parameters":{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"$ref":"#/$defs/a"}}}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var def ToolDefinition
		if json.Unmarshal(raw, &def) != nil {
			return
		}
		normalize(&def)
		if _, ps := validateDefinition(&def, func(string) bool { return true }); len(ps) == 0 {
			if _, err := RenderAll(def); err != nil {
				t.Fatalf("valid definition does not render: %v", err)
			}
		}
	})
}
