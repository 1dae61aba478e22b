package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-openapi/loads"
	"github.com/go-openapi/spec"
	"github.com/go-openapi/strfmt"
	"github.com/go-openapi/validate"

	"toolbelt/docs"
	"toolbelt/internal/nodetest"
	"toolbelt/web"
)

// TestOpenAPISpec validates the generated document with a real Swagger 2.0
// validator and checks it documents every route of the route table with
// its security requirement.
func TestOpenAPISpec(t *testing.T) {
	app := newTestApp(t)
	r := app.do(t, "none", "GET", "/swagger/doc.json", nil)
	if r.Status != 200 || string(r.Body) != string(docs.JSON) {
		t.Fatalf("/swagger/doc.json does not serve the generated document: %d", r.Status)
	}
	doc, err := loads.Analyzed(json.RawMessage(r.Body), "2.0")
	if err != nil {
		t.Fatalf("load spec: %v", err)
	}
	if err := validate.Spec(doc, strfmt.Default); err != nil {
		t.Fatalf("spec is invalid: %v", err)
	}
	sw := doc.Spec()
	// Swagger UI shows the description: it links the OpenAPI 3 form.
	if !strings.Contains(sw.Info.Description, "("+web.OpenAPI3Path+")") {
		t.Errorf("the description does not link %s: %q", web.OpenAPI3Path, sw.Info.Description)
	}
	// A documented URL is the base path joined with the operation's path,
	// as every client builds it: each must be a route the server serves.
	base := strings.TrimSuffix(sw.BasePath, "/")
	param := regexp.MustCompile(`:([a-z]+)`)
	served := map[string]bool{"GET /healthz": true, "GET /readyz": true}
	for _, rt := range web.Routes {
		served[rt.Method+" /api/v1"+param.ReplaceAllString(rt.Path, "{$1}")] = true
	}
	ids := map[string]string{}
	for path, item := range sw.Paths.Paths {
		for method, op := range map[string]*spec.Operation{"GET": item.Get, "POST": item.Post, "PUT": item.Put, "DELETE": item.Delete, "PATCH": item.Patch} {
			if op == nil {
				continue
			}
			at := method + " " + base + path
			if !served[at] {
				t.Errorf("documented %s is not served", at)
			}
			// Client generators name their methods by operationId.
			if op.ID == "" {
				t.Errorf("%s has no operationId", at)
			} else if other, dup := ids[op.ID]; dup {
				t.Errorf("operationId %q of %s is also %s's", op.ID, at, other)
			}
			ids[op.ID] = at
		}
	}
	for _, rt := range web.Routes {
		path := strings.TrimPrefix("/api/v1"+param.ReplaceAllString(rt.Path, "{$1}"), base)
		item, ok := sw.Paths.Paths[path]
		if !ok {
			t.Errorf("route %s %s is not documented", rt.Method, path)
			continue
		}
		op := map[string]*spec.Operation{"GET": item.Get, "POST": item.Post, "PUT": item.Put, "DELETE": item.Delete}[rt.Method]
		if op == nil {
			t.Errorf("route %s %s is not documented", rt.Method, path)
			continue
		}
		b, _ := json.Marshal(op)
		if !strings.Contains(string(b), `"BearerAuth"`) {
			t.Errorf("route %s %s does not declare BearerAuth", rt.Method, path)
		}
		if !strings.Contains(string(b), `"401"`) {
			t.Errorf("route %s %s does not document 401", rt.Method, path)
		}
	}
}

// TestOpenAPI3: /openapi.json is the same API in OpenAPI 3.0, converted
// from the generated document with kin-openapi: the committed
// docs/openapi3.json, fresh, and a valid document with the same operations
// (by path, method and operationId) and the same schemas.
func TestOpenAPI3(t *testing.T) {
	app := newTestApp(t)
	r := app.do(t, "none", "GET", web.OpenAPI3Path, nil)
	if r.Status != 200 {
		t.Fatalf("%s: %d", web.OpenAPI3Path, r.Status)
	}
	fresh, err := docs.OpenAPI3()
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Body) != string(fresh) {
		t.Fatalf("%s is not docs.OpenAPI3 of the generated document: run 'make generate'", web.OpenAPI3Path)
	}
	v3, err := openapi3.NewLoader().LoadFromData(r.Body)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := v3.Validate(context.Background(), openapi3.DisableExamplesValidation()); err != nil {
		t.Fatalf("invalid OpenAPI 3 document: %v", err)
	}
	v2, err := loads.Analyzed(json.RawMessage(docs.JSON), "2.0")
	if err != nil {
		t.Fatal(err)
	}
	want, got := map[string]string{}, map[string]string{}
	for path, item := range v2.Spec().Paths.Paths {
		for method, op := range map[string]*spec.Operation{"GET": item.Get, "POST": item.Post, "PUT": item.Put, "DELETE": item.Delete, "PATCH": item.Patch} {
			if op != nil {
				want[method+" "+path] = op.ID
			}
		}
	}
	for path, item := range v3.Paths.Map() {
		for method, op := range item.Operations() {
			got[method+" "+path] = op.OperationID
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("operations differ:\n v3 %v\n v2 %v", got, want)
	}
	var defs []string
	for name := range v2.Spec().Definitions {
		defs = append(defs, name)
	}
	if schemas := slices.Sorted(maps.Keys(v3.Components.Schemas)); !slices.Equal(schemas, slices.Sorted(slices.Values(defs))) {
		t.Errorf("schemas differ:\n v3 %v\n v2 %v", schemas, slices.Sorted(slices.Values(defs)))
	}
}

// TestOpenAPILint lints both served documents with Redocly's recommended
// rules, as an API's consumers and their tooling do: no errors. (What it
// still warns of: no license in info, and no 4XX response on /healthz and
// /readyz, which have none.)
func TestOpenAPILint(t *testing.T) {
	app := newTestApp(t)
	dir := t.TempDir()
	for _, path := range []string{"/swagger/doc.json", web.OpenAPI3Path} {
		r := app.do(t, "none", "GET", path, nil)
		if r.Status != 200 {
			t.Fatalf("%s: %d", path, r.Status)
		}
		file := filepath.Join(dir, strings.TrimPrefix(strings.ReplaceAll(path, "/", "-"), "-"))
		if err := os.WriteFile(file, r.Body, 0o644); err != nil {
			t.Fatal(err)
		}
		out, _ := nodetest.Exec(t, nil, "redocly", "lint", "--extends", "recommended", "--format", "json", file)
		var report struct {
			Totals struct {
				Errors, Warnings int
			}
			Problems []struct {
				RuleID, Severity, Message string
				Location                  []struct{ Pointer string }
			}
		}
		if err := json.Unmarshal(out[:bytes.LastIndexByte(out, '}')+1], &report); err != nil {
			t.Fatalf("%s: redocly printed no report: %v\n%s", path, err, out)
		}
		for _, p := range report.Problems {
			if p.Severity == "error" {
				t.Errorf("%s: %s at %v: %s", path, p.RuleID, p.Location, p.Message)
			}
		}
		t.Logf("%s: %d errors, %d warnings", path, report.Totals.Errors, report.Totals.Warnings)
		if report.Totals.Errors != 0 {
			t.Errorf("%s: redocly counts %d errors", path, report.Totals.Errors)
		}
	}
}

// TestOpenAPIToolRenderings: GET /tools/{name} answers the stored tool,
// or with format its rendering; the OpenAPI 3 document describes both.
// The real answers, in every format, validate against the document's
// response schema, each rendering against its own format's branch.
func TestOpenAPIToolRenderings(t *testing.T) {
	app := newTestApp(t)
	doc, err := openapi3.NewLoader().LoadFromData(docs.OpenAPI3JSON)
	if err != nil {
		t.Fatal(err)
	}
	op := doc.Paths.Find("/api/v1/tools/{name}").Get
	body := op.Responses.Status(200).Value.Content.Get("application/json").Schema.Value
	branches := map[string]*openapi3.Schema{}
	for _, b := range body.AnyOf {
		for _, shape := range b.Value.AnyOf {
			branches[shape.Value.Title] = shape.Value
		}
	}
	decode := func(raw []byte) any {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	r := app.do(t, "agent", "GET", "/api/v1/tools/file_read", nil)
	if err := body.VisitJSON(decode(r.Body)); r.Status != 200 || err != nil {
		t.Errorf("the stored tool: %d %v", r.Status, err)
	}
	for _, format := range []string{"openai", "openai_responses", "anthropic", "gemini", "mcp"} {
		r := app.do(t, "agent", "GET", "/api/v1/tools/file_read?format="+format, nil)
		if r.Status != 200 {
			t.Fatalf("%s: %d %s", format, r.Status, r.Body)
		}
		v := decode(r.Body)
		if err := body.VisitJSON(v); err != nil {
			t.Errorf("%s rendering against the response schema: %v", format, err)
		}
		branch := branches[format]
		if branch == nil {
			t.Errorf("the document describes no %s rendering (branches %v)", format, slices.Sorted(maps.Keys(branches)))
			continue
		}
		if err := branch.VisitJSON(v); err != nil {
			t.Errorf("%s rendering against its branch: %v\n%s", format, err, r.Body)
		}
	}
}
