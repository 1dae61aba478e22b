package invoke

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"toolbelt/models"
	"toolbelt/services/catalog"
	"toolbelt/services/embed"
	"toolbelt/services/netpolicy"
	"toolbelt/services/runners"
	"toolbelt/services/tooldef"
)

// passed is the step after a guard under test: it marks that the call got
// through.
func passed(context.Context, *call) ToolResult {
	return ToolResult{Status: models.StatusSucceeded, Success: true}
}

// TestResolveGuard runs the resolve guard alone: current and pinned
// versions, unknown names and versions, retired tools.
func TestResolveGuard(t *testing.T) {
	ctx := context.Background()
	store, authz := catalogFixture(t)
	reg := catalog.NewRegistry(store, quiet)
	read, err := reg.Get(ctx, "file_read")
	if err != nil {
		t.Fatal(err)
	}
	next := read.Definition
	next.Version = "1.1.0"
	next.Description += " Now with a second version."
	if _, err := reg.Publish(ctx, "file_read", next, nil); err != nil {
		t.Fatal(err)
	}
	if err := reg.Retire(ctx, "file_list", nil); err != nil {
		t.Fatal(err)
	}
	inv := &Invoker{store: store, selector: newFixtureSelector(t, store, authz, embed.NewBuiltin(), 0), log: quiet}
	step := inv.resolve(passed)
	cases := []struct {
		name, tool, version string
		wantVersion         string // the version resolved, or "" when refused
		wantInMessage       string
		wantInSuggestion    string
	}{
		{name: "current version", tool: "file_read", wantVersion: "1.1.0"},
		{name: "pinned older version", tool: "file_read", version: read.Definition.Version, wantVersion: read.Definition.Version},
		{name: "misspelt name", tool: "file_raed", wantInMessage: `"file_raed" does not exist`, wantInSuggestion: "file_read"},
		{name: "not a tool name", tool: "../etc/passwd", wantInMessage: "does not exist", wantInSuggestion: "POST /api/v1/tools/select"},
		{name: "unknown version", tool: "file_read", version: "9.9.9", wantInMessage: `has no version "9.9.9"`},
		{name: "retired tool", tool: "file_list", wantInMessage: "does not exist"},
		{name: "retired tool, pinned version", tool: "file_list", version: read.Definition.Version, wantInMessage: "has no version"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &call{req: CallRequest{Tool: tc.tool, Version: tc.version, SessionID: "s"}}
			res := step(ctx, c)
			if tc.wantVersion != "" {
				if !res.Success || c.def.Version != tc.wantVersion || c.version == 0 {
					t.Fatalf("resolved %q (id %d), %+v; want version %s", c.def.Version, c.version, res.Error, tc.wantVersion)
				}
				return
			}
			if res.Success || res.Error.Code != models.CodeToolNotFound || res.Status != models.StatusRefused {
				t.Fatalf("want TOOL_NOT_FOUND, got %+v", res)
			}
			if !strings.Contains(res.Error.Message, tc.wantInMessage) || !strings.Contains(res.Error.Suggestion, tc.wantInSuggestion) {
				t.Errorf("message %q, suggestion %q", res.Error.Message, res.Error.Suggestion)
			}
		})
	}
	// The current version is remembered until the catalog changes.
	inv.CatalogChanged()
	if _, ok := inv.tools.Load("file_read"); ok {
		t.Error("CatalogChanged kept a resolved version")
	}
}

// TestValidateGuard runs argument validation alone: every field error with
// its JSON pointer, and the schema in the suggestion.
func TestValidateGuard(t *testing.T) {
	schema := `{"type":"object","properties":{
		"query":{"type":"string","minLength":1},
		"limit":{"type":"integer","minimum":1,"maximum":50},
		"filters":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}},
		"required":["query"],"additionalProperties":false}`
	def := tooldef.Definition{Name: "search_docs", Version: "1.0.0", Parameters: json.RawMessage(schema)}
	inv := &Invoker{schemas: newSchemaCache()}
	step := inv.validate(passed)
	cases := []struct {
		name     string
		args     string
		pointers []string // nil: the call passes
	}{
		{"valid", `{"query":"go","limit":5}`, nil},
		{"valid with nested items", `{"query":"go","filters":[{"name":"lang"}]}`, nil},
		{"missing required", `{"limit":5}`, []string{""}},
		{"empty arguments miss the required field", ``, []string{""}},
		{"wrong type", `{"query":"go","limit":"five"}`, []string{"/limit"}},
		{"out of range", `{"query":"go","limit":500}`, []string{"/limit"}},
		{"nested error", `{"query":"go","filters":[{"name":"a"},{"name":3}]}`, []string{"/filters/1/name"}},
		{"unknown field", `{"query":"go","limti":5}`, []string{""}},
		{"every error listed", `{"query":"","limit":0}`, []string{"/query", "/limit"}},
		{"not an object", `["go"]`, []string{}},
		{"not JSON", `{"query":`, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &call{def: def, version: 7, req: CallRequest{Arguments: json.RawMessage(tc.args)}}
			res := step(context.Background(), c)
			if tc.pointers == nil {
				if !res.Success || c.args["query"] != "go" {
					t.Fatalf("refused valid arguments: %+v (args %v)", res.Error, c.args)
				}
				return
			}
			if res.Success || res.Error.Code != models.CodeValidation || res.Status != models.StatusRefused {
				t.Fatalf("want VALIDATION_ERROR, got %+v", res)
			}
			var got []string
			for _, p := range res.Error.Problems {
				got = append(got, p.Pointer)
				if p.Message == "" {
					t.Errorf("problem at %q has no message", p.Pointer)
				}
			}
			for _, want := range tc.pointers {
				if !slices.Contains(got, want) {
					t.Errorf("problems at %q; want one at %q", got, want)
				}
			}
			if !strings.Contains(res.Error.Suggestion, `"limit":{"type":"integer"`) && !strings.Contains(res.Error.Suggestion, `"limit"`) {
				t.Errorf("the suggestion does not show the schema: %s", res.Error.Suggestion)
			}
		})
	}
	// The compiled schema is kept per version.
	if _, ok := inv.schemas.Get(7); !ok {
		t.Error("compiled schema not cached")
	}
}

// TestSecureGuard runs the security checks alone: paths, shell commands and
// URLs.
func TestSecureGuard(t *testing.T) {
	inv := &Invoker{runners: runners.New(t.TempDir(), netpolicy.Policy{}, quiet)}
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
