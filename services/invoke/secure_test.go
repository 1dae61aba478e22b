package invoke

import (
	"context"
	"strings"
	"testing"

	"toolbelt/models"
	"toolbelt/services/runners"
	"toolbelt/services/tooldef"
)

// TestSecureGuard runs the security checks alone: paths, shell commands and
// URLs.
func TestSecureGuard(t *testing.T) {
	inv := &Invoker{runners: runners.NewTable(runners.Deps{DataDir: t.TempDir(), Log: quiet})}
	step := inv.secure(passed)
	fileTool := tooldef.Definition{Name: "file_read", Category: "filesystem", Runner: tooldef.Runner{Kind: tooldef.RunnerBuiltin, Builtin: "file_read"}}
	reports := fileTool
	reports.Security.AllowedPaths = []string{"reports"}
	shell := tooldef.Definition{Name: "shell_exec", Category: "shell"}
	piping := shell
	piping.Security.ShellOperators = true
	web := tooldef.Definition{Name: "http_request", Category: "api"}
	cases := []struct {
		name string
		def  tooldef.Definition
		args map[string]any
		code string // "" passes
	}{
		{"relative path", fileTool, map[string]any{"path": "notes/a.txt"}, ""},
		{"dot-dot", fileTool, map[string]any{"path": "notes/../../x"}, models.CodePathNotAllowed},
		{"absolute path", fileTool, map[string]any{"path": "/etc/passwd"}, models.CodePathNotAllowed},
		{"windows path", fileTool, map[string]any{"path": `C:\Windows\win.ini`}, models.CodePathNotAllowed},
		{"NUL byte", fileTool, map[string]any{"path": "a\x00b"}, models.CodePathNotAllowed},
		{"inside allowed paths", reports, map[string]any{"path": "reports/q3.csv"}, ""},
		{"outside allowed paths", reports, map[string]any{"path": "secrets/key"}, models.CodePathNotAllowed},
		{"allowed-path prefix is not a parent", reports, map[string]any{"path": "reports-old/x"}, models.CodePathNotAllowed},
		{"plain command", shell, map[string]any{"command": "ls -la /tmp"}, ""},
		{"chained command", shell, map[string]any{"command": "ls; rm -rf /"}, models.CodeCommandRejected},
		{"substitution", shell, map[string]any{"command": "echo $(cat /etc/shadow)"}, models.CodeCommandRejected},
		{"redirect", shell, map[string]any{"command": "echo x > /etc/passwd"}, models.CodeCommandRejected},
		{"pipe allowed by the tool", piping, map[string]any{"command": "ls | wc -l"}, ""},
		{"public URL", web, map[string]any{"url": "https://example.com/a"}, ""},
		{"loopback URL", web, map[string]any{"url": "http://127.0.0.1:8080/"}, models.CodeURLNotAllowed},
		{"metadata service", web, map[string]any{"url": "http://169.254.169.254/latest/"}, models.CodeURLNotAllowed},
		{"file scheme", web, map[string]any{"url": "file:///etc/passwd"}, models.CodeURLNotAllowed},
		{"localhost name", web, map[string]any{"url": "http://localhost/"}, models.CodeURLNotAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &call{def: tc.def, args: tc.args, req: CallRequest{SessionID: "s1"}, caller: nil}
			res := step(context.Background(), c)
			if tc.code == "" {
				if !res.Success {
					t.Fatalf("refused: %+v", res.Error)
				}
				if !strings.HasSuffix(c.dir.Path, "/sessions/p0/s1") {
					t.Errorf("work directory %s", c.dir.Path)
				}
				return
			}
			if res.Success || res.Error.Code != tc.code || res.Error.Suggestion == "" {
				t.Errorf("want %s with a suggestion, got %+v", tc.code, res.Error)
			}
		})
	}
}
