package web_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"toolbelt/docs"
	"toolbelt/internal/nodetest"
)

// TestOpenAPI3FreeForm: no object in the OpenAPI 3 document names no
// properties without saying it takes any (additionalProperties): client
// generators type such an object as empty (openapi-typescript's
// Record<string, never>), and a typed client could send no arguments.
func TestOpenAPI3FreeForm(t *testing.T) {
	var doc any
	if err := json.Unmarshal(docs.OpenAPI3JSON, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			_, props := v["properties"]
			_, additional := v["additionalProperties"]
			_, composed := v["allOf"]
			if v["type"] == "object" && !props && !additional && !composed {
				t.Errorf("%s is an object with no properties and no additionalProperties", at)
			}
			for k, sub := range v {
				walk(at+"/"+k, sub)
			}
		case []any:
			for i, sub := range v {
				walk(fmt.Sprintf("%s/%d", at, i), sub)
			}
		}
	}
	walk("#", doc)
}

// tsFlowReport is what testdata/frameworks/rest/flow.ts printed.
type tsFlowReport struct {
	Selected    []string `json:"selected"`
	Rendered    []string `json:"rendered"`
	SelectionID string   `json:"selection_id"`
	Wrote       struct {
		Status string         `json:"status"`
		Data   map[string]any `json:"data"`
	} `json:"wrote"`
	Read struct {
		Status  string `json:"status"`
		Content string `json:"content"`
	} `json:"read"`
	Refused struct {
		Status   string `json:"status"`
		Code     string `json:"code"`
		Problems int    `json:"problems"`
	} `json:"refused"`
	NoTask struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"no_task"`
	Asked struct {
		Status     string `json:"status"`
		Code       string `json:"code"`
		ApprovalID string `json:"approval_id"`
	} `json:"asked"`
	Approval struct {
		Status    string `json:"status"`
		DecidedBy uint   `json:"decided_by"`
	} `json:"approval"`
	Record struct {
		Status       string `json:"status"`
		Polls        int    `json:"polls"`
		ResultStatus string `json:"result_status"`
	} `json:"record"`
	After struct {
		Content string `json:"content"`
	} `json:"after"`
}

// TestOpenAPITypeScriptClient drives the REST API with a client typed by
// openapi-typescript from the committed docs/openapi3.json: flow.ts (plain
// fetch over the generated paths types, no casts) must pass strict tsc —
// free-form fields such as a call's arguments typed as empty objects fail
// it — and then, run by Node 22, select tools, write and read a file, meet
// a validation error, and see a dangerous call through approval.
func TestOpenAPITypeScriptClient(t *testing.T) {
	t.Parallel()
	dir, _ := nodetest.Frameworks(t)
	rest := filepath.Join(dir, "rest")
	noCasts(t, filepath.Join(rest, "flow.ts"))

	tmp := t.TempDir()
	spec, types := filepath.Join(tmp, "openapi3.json"), filepath.Join(tmp, "api.d.ts")
	if err := os.WriteFile(spec, docs.OpenAPI3JSON, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := nodetest.ExecFramework(t, nil, "openapi-typescript", spec, "-o", types); err != nil {
		t.Fatalf("openapi-typescript: %v\n%s", err, out)
	}
	// flow.ts's own tsconfig, with the types just generated and the
	// output here.
	out := filepath.Join(tmp, "out")
	config, err := json.Marshal(map[string]any{
		"extends": filepath.Join(rest, "tsconfig.json"),
		"compilerOptions": map[string]any{
			"paths":     map[string][]string{"toolbelt-api": {types}},
			"outDir":    out,
			"typeRoots": []string{filepath.Join(dir, "node_modules", "@types")},
		},
		"files": []string{filepath.Join(rest, "flow.ts")},
	})
	if err != nil {
		t.Fatal(err)
	}
	tsconfig := filepath.Join(tmp, "tsconfig.json")
	if err := os.WriteFile(tsconfig, config, 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, err := nodetest.ExecFramework(t, nil, "tsc", "-p", tsconfig); err != nil {
		t.Fatalf("tsc: %v\n%s", err, msg)
	}
	// tsc wrote an ES module (testdata/frameworks is "type": "module").
	if err := os.WriteFile(filepath.Join(out, "package.json"), []byte(`{"type": "module"}`), 0o644); err != nil {
		t.Fatal(err)
	}

	app := newTestApp(t)
	dangerousWrite(t, app)
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	env := []string{"TOOLBELT_API_URL=" + srv.URL, "TOOLBELT_AGENT_KEY=" + app.keys["agent"], "TOOLBELT_REVIEWER_KEY=" + app.keys["reviewer"]}
	printed, err := nodetest.ExecFramework(t, env, filepath.Join(out, "flow.js"))
	if err != nil {
		t.Fatalf("flow.js: %v\n%s", err, printed)
	}
	var r tsFlowReport
	if err := json.Unmarshal(printed, &r); err != nil {
		t.Fatalf("report: %v\n%s", err, printed)
	}
	t.Logf("selected %v; refused %+v; no task %+v; approved after %d polls", r.Selected, r.Refused, r.NoTask, r.Record.Polls)

	if !slices.Contains(r.Selected, "file_write") || !slices.Equal(r.Rendered, r.Selected) || r.SelectionID == "" {
		t.Errorf("selection: tools %v rendered for OpenAI as %v, id %q", r.Selected, r.Rendered, r.SelectionID)
	}
	if r.Wrote.Status != "succeeded" || r.Wrote.Data["path"] != "a.txt" || r.Read.Status != "succeeded" || r.Read.Content != "hello from TypeScript\n" {
		t.Errorf("file_write then file_read: %+v %+v", r.Wrote, r.Read)
	}
	if r.Refused.Status != "refused" || r.Refused.Code != "VALIDATION_ERROR" || r.Refused.Problems == 0 {
		t.Errorf("arguments the parameters refuse: %+v", r.Refused)
	}
	if r.NoTask.Code != "VALIDATION_ERROR" || r.NoTask.Message == "" {
		t.Errorf("selection without a task: %+v", r.NoTask)
	}
	if r.Asked.Status != "awaiting_approval" || r.Asked.Code != "CONFIRMATION_REQUIRED" || r.Asked.ApprovalID == "" {
		t.Errorf("dangerous call: %+v", r.Asked)
	}
	if r.Approval.Status != "approved" || r.Approval.DecidedBy != app.ids["reviewer"] {
		t.Errorf("approval: %+v, want approved by %d", r.Approval, app.ids["reviewer"])
	}
	if r.Record.Status != "succeeded" || r.Record.ResultStatus != "succeeded" || r.After.Content != "approved by a reviewer" {
		t.Errorf("the approved call: %+v, then read %q", r.Record, r.After.Content)
	}
}

// noCasts fails t when the TypeScript file's code (its comments aside)
// casts with "as" or uses "any": the generated types must do the work.
func noCasts(t *testing.T, file string) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cast := regexp.MustCompile(`\bas\s+[A-Za-z_{\[(]|\bany\b|<any>`)
	for i, line := range strings.Split(string(src), "\n") {
		code, _, _ := strings.Cut(line, "//")
		if m := cast.FindString(code); m != "" {
			t.Errorf("%s:%d: %q: no casts and no any", filepath.Base(file), i+1, m)
		}
	}
}
