package web_test

import (
	"strings"
	"testing"
)

// TestCommandArgvOptionsOverHTTP: an argument that a command
// tool's program would read as an option is refused with
// VALIDATION_ERROR naming it before a reviewer is asked, and templates
// that let one through are refused at registration.
func TestCommandArgvOptionsOverHTTP(t *testing.T) {
	app := newTestApp(t)
	build := toolDef("build", func(m map[string]any) {
		m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{"target": map[string]any{"type": "string"}}, "required": []any{"target"}}
		m["security"] = map[string]any{"level": "dangerous", "sandbox": true}
		m["runner"] = map[string]any{"kind": "command", "argv": []any{"make", "{{target}}"}, "runsArgumentAsCode": true}
	})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", build); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	for _, target := range []string{"--eval=$(shell touch pwned)", "-f/etc/passwd", "X:=$(file >pwned,x)"} {
		code, res := app.call(t, "admin", map[string]any{"tool": "build", "arguments": map[string]any{"target": target}})
		e, _ := res["error"].(map[string]any)
		if code != 422 || errCode(res) != "VALIDATION_ERROR" || !strings.Contains(e["message"].(string), `argument "target"`) {
			t.Errorf("%q: %d %v", target, code, res)
		}
	}
	pending := app.do(t, "reviewer", "GET", "/api/v1/approvals", nil).JSON(t)["approvals"].([]any)
	if len(pending) != 0 {
		t.Errorf("a reviewer was asked about a refused argument: %v", pending)
	}
	if code, res := app.call(t, "admin", map[string]any{"tool": "build", "arguments": map[string]any{"target": "all"}}); code != 202 || errCode(res) != "CONFIRMATION_REQUIRED" {
		t.Errorf("a plain target: %d %v", code, res)
	}

	for name, edit := range map[string]func(m map[string]any){
		"head_lines": func(m map[string]any) {
			m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{
				"lines": map[string]any{"type": "integer"}, "path": map[string]any{"type": "string"}}, "required": []any{"path"}}
			m["runner"] = map[string]any{"kind": "command", "argv": []any{"head", "-n", "{{lines}}", "{{path}}"}}
		},
		"make_any": func(m map[string]any) {
			m["runner"] = map[string]any{"kind": "command", "argv": []any{"make", "{{text}}"}, "optionArguments": []any{"text"}}
		},
	} {
		r := app.do(t, "admin", "POST", "/api/v1/tools", toolDef(name, edit))
		if r.Status != 422 || !strings.Contains(string(r.Body), "/runner/") {
			t.Errorf("%s: %d %s", name, r.Status, r.Body)
		}
	}
}
