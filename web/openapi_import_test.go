package web_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"toolbelt/services/catalog"
	"toolbelt/services/netpolicy"
)

const importPath = "/api/v1/import/openapi"

// petstore reads a document from testdata.
func petstore(t *testing.T, name string) string {
	t.Helper()
	doc, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

// seenRequest is what the fake API received.
type seenRequest struct {
	Method, RequestURI, ContentType, Trace string
	Body                                   string
}

// fakePetstore answers every request with 200 and records it.
func fakePetstore(t *testing.T) (*httptest.Server, func() []seenRequest) {
	t.Helper()
	var mu sync.Mutex
	var seen []seenRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, seenRequest{Method: r.Method, RequestURI: r.RequestURI, ContentType: r.Header.Get("Content-Type"),
			Trace: r.Header.Get("X-Request-Trace"), Body: string(body)})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	return srv, func() []seenRequest {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// localApp may call tools on 127.0.0.1, where the fake API listens.
func localApp(t *testing.T) *testApp {
	return newTestAppWith(t, hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true},
		netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
}

func toolNames(t *testing.T, body map[string]any) []string {
	t.Helper()
	var names []string
	for _, op := range body["operations"].([]any) {
		if tool, ok := op.(map[string]any)["tool"].(map[string]any); ok {
			names = append(names, tool["name"].(string))
		}
	}
	return names
}

// TestOpenAPIImportDryRun previews the tools of the Petstore document and
// registers nothing.
func TestOpenAPIImportDryRun(t *testing.T) {
	app := newTestApp(t)
	r := app.do(t, "admin", "POST", importPath, map[string]any{"document": petstore(t, "petstore.yaml"), "dry_run": true})
	if r.Status != http.StatusOK {
		t.Fatalf("dry run: %d %s", r.Status, r.Body)
	}
	body := r.JSON(t)
	want := []string{"list_pets", "add_pet", "get_pet_by_id", "delete_pet", "get_store_inventory"}
	if got := toolNames(t, body); !slices.Equal(got, want) {
		t.Errorf("tools %v, want %v", got, want)
	}
	if body["title"] != "Swagger Petstore" || body["dry_run"] != true || body["registered"] != nil {
		t.Errorf("result: %s", r.Body)
	}
	ops := body["operations"].([]any)
	list := ops[0].(map[string]any)["tool"].(map[string]any)
	runner := list["runner"].(map[string]any)
	if runner["url"] != "https://petstore.example.com/v1/pets?status={{status}}&limit={{limit}}" || runner["method"] != "GET" {
		t.Errorf("list_pets runner: %v", runner)
	}
	if list["category"] != "api" || list["security"].(map[string]any)["level"] != "moderate" {
		t.Errorf("list_pets: %v", list)
	}
	del := ops[3].(map[string]any)
	if del["tool"].(map[string]any)["security"].(map[string]any)["level"] != "dangerous" {
		t.Errorf("delete_pet is not dangerous: %v", del["tool"])
	}
	if notes := fmt.Sprint(del["notes"]); !strings.Contains(notes, "api_key") {
		t.Errorf("the credential header is not noted as left out: %v", notes)
	}
	// The body schema is self-contained JSON Schema 2020-12: $refs expanded,
	// nullable and the boolean exclusiveMinimum of OpenAPI 3.0 converted.
	add := ops[1].(map[string]any)["tool"].(map[string]any)
	params, _ := json.Marshal(add["parameters"])
	for _, s := range []string{`"required":["body"]`, `"tag":{"type":["string","null"]}`, `"weight":{"exclusiveMinimum":0,"type":"number"}`, `"category":{"properties":{"id"`} {
		if !strings.Contains(string(params), s) {
			t.Errorf("add_pet parameters lack %s: %s", s, params)
		}
	}
	if strings.Contains(string(params), "$ref") || strings.Contains(string(params), "nullable") {
		t.Errorf("add_pet parameters keep OpenAPI-only keywords: %s", params)
	}
	for _, name := range want {
		if r := app.do(t, "admin", "GET", "/api/v1/tools/"+name, nil); r.Status != http.StatusNotFound {
			t.Errorf("dry run registered %s: %d", name, r.Status)
		}
	}
	// Filters keep operations by OpenAPI tag or by operationId.
	for _, f := range []struct {
		filter map[string]any
		want   []string
	}{
		{map[string]any{"tags": []string{"store"}}, []string{"get_store_inventory"}},
		{map[string]any{"operations": []string{"addPet", "deletePet"}}, []string{"add_pet", "delete_pet"}},
	} {
		f.filter["document"], f.filter["dry_run"] = petstore(t, "petstore.yaml"), true
		r := app.do(t, "admin", "POST", importPath, f.filter)
		if got := toolNames(t, r.JSON(t)); r.Status != 200 || !slices.Equal(got, f.want) {
			t.Errorf("filter %v: %d %v, want %v", f.filter["tags"], r.Status, got, f.want)
		}
	}
}

// TestOpenAPIImportCalls imports the Petstore document against a local
// fake and calls the tools: method, escaped path parameter, query (absent
// ones left out, arrays repeated), header and JSON body arrive as the
// document describes.
func TestOpenAPIImportCalls(t *testing.T) {
	srv, seen := fakePetstore(t)
	app := localApp(t)
	r := app.do(t, "admin", "POST", importPath, map[string]any{
		"document": petstore(t, "petstore.yaml"), "base_url": srv.URL + "/v1", "prefix": "shop",
	})
	if r.Status != http.StatusCreated {
		t.Fatalf("import: %d %s", r.Status, r.Body)
	}
	reg, _ := json.Marshal(r.JSON(t)["registered"])
	if !strings.Contains(string(reg), `{"name":"shop_list_pets","version":"1.0.0"}`) || strings.Count(string(reg), `"name"`) != 5 {
		t.Errorf("registered: %s", reg)
	}
	if tool := app.do(t, "admin", "GET", "/api/v1/tools/shop_add_pet", nil).JSON(t); tool["current"] != true {
		t.Fatalf("shop_add_pet: %v", tool)
	}

	calls := []struct {
		name       string
		tool       string
		args       map[string]any
		wantMethod string
		wantURI    string
		wantBody   string
		wantTrace  string
	}{
		{"path parameter escaped as one segment", "shop_get_pet_by_id", map[string]any{"petId": "7/../admin"},
			"GET", "/v1/pets/7%2F..%2Fadmin", "", ""},
		{"query array repeated, header sent", "shop_list_pets", map[string]any{"status": []any{"available", "sold"}, "limit": 5, "X_Request_Trace": "t-1"},
			"GET", "/v1/pets?status=available&status=sold&limit=5", "", "t-1"},
		{"absent optional query and header left out", "shop_list_pets", map[string]any{},
			"GET", "/v1/pets", "", ""},
		{"JSON body", "shop_add_pet", map[string]any{"body": map[string]any{"name": "Rex \"the dog\"", "tag": nil, "category": map[string]any{"id": 1}}},
			"POST", "/v1/pets", `{"category":{"id":1},"name":"Rex \"the dog\"","tag":null}`, ""},
		{"no parameters", "shop_get_store_inventory", map[string]any{},
			"GET", "/v1/store/inventory", "", ""},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			before := len(seen())
			code, res := app.call(t, "admin", map[string]any{"tool": tc.tool, "arguments": tc.args})
			if code != 200 || res["success"] != true {
				t.Fatalf("call: %d %v", code, res)
			}
			got := seen()
			if len(got) != before+1 {
				t.Fatalf("the fake got %d requests, want 1", len(got)-before)
			}
			req := got[len(got)-1]
			if req.Method != tc.wantMethod || req.RequestURI != tc.wantURI || req.Trace != tc.wantTrace {
				t.Errorf("got %s %s (trace %q), want %s %s (trace %q)", req.Method, req.RequestURI, req.Trace, tc.wantMethod, tc.wantURI, tc.wantTrace)
			}
			if tc.wantBody != "" {
				var gotBody, wantBody any
				if err := json.Unmarshal([]byte(req.Body), &gotBody); err != nil {
					t.Fatalf("body %q is not JSON: %v", req.Body, err)
				}
				_ = json.Unmarshal([]byte(tc.wantBody), &wantBody)
				if fmt.Sprint(gotBody) != fmt.Sprint(wantBody) || req.ContentType != "application/json" {
					t.Errorf("body %s (%s), want %s", req.Body, req.ContentType, tc.wantBody)
				}
			}
		})
	}
	// A body that breaks the schema is refused before any request.
	before := len(seen())
	if code, res := app.call(t, "admin", map[string]any{"tool": "shop_add_pet", "arguments": map[string]any{"body": map[string]any{"tag": "x"}}}); code != 422 || errCode(res) != "VALIDATION_ERROR" {
		t.Errorf("body without name: %d %v", code, res)
	}
	// DELETE is dangerous: even the admin's call waits for approval.
	if code, res := app.call(t, "admin", map[string]any{"tool": "shop_delete_pet", "arguments": map[string]any{"petId": "7"}}); code != 202 || res["status"] != "awaiting_approval" {
		t.Errorf("delete: %d %v", code, res)
	}
	if n := len(seen()) - before; n != 0 {
		t.Errorf("refused calls reached the API %d times", n)
	}
}

// TestOpenAPIImportSwagger2 imports a Swagger 2.0 document, converted with
// openapi2conv, fetched by URL; its relative server follows the address.
func TestOpenAPIImportSwagger2(t *testing.T) {
	srv, seen := fakePetstore(t)
	doc := strings.Replace(petstore(t, "petstore-swagger2.json"), `"host": "petstore.example.com",`, "", 1)
	docs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/swagger.json" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, doc)
	}))
	defer docs.Close()
	app := localApp(t)
	// Without a host the document's server is relative (/api), so the
	// tools call the host it was fetched from; here base_url points them
	// at the fake instead.
	dry := app.do(t, "admin", "POST", importPath, map[string]any{"url": docs.URL + "/swagger.json", "dry_run": true})
	if dry.Status != 200 || !strings.Contains(string(dry.Body), `"url":"`+docs.URL+`/api/pets/{{id}}"`) {
		t.Fatalf("dry run by url: %d %s", dry.Status, dry.Body)
	}
	r := app.do(t, "admin", "POST", importPath, map[string]any{"url": docs.URL + "/swagger.json", "base_url": srv.URL + "/api"})
	if r.Status != http.StatusCreated {
		t.Fatalf("import: %d %s", r.Status, r.Body)
	}
	want := []string{"find_pets", "add_pet", "find_pet_by_id", "delete_pet"}
	if got := toolNames(t, r.JSON(t)); !slices.Equal(got, want) {
		t.Errorf("tools %v, want %v", got, want)
	}
	code, res := app.call(t, "admin", map[string]any{"tool": "find_pets", "arguments": map[string]any{"tags": []any{"a b", "c"}, "limit": 2}})
	if code != 200 || res["success"] != true {
		t.Fatalf("find_pets: %d %v", code, res)
	}
	code, res = app.call(t, "admin", map[string]any{"tool": "add_pet", "arguments": map[string]any{"body": map[string]any{"name": "Tom"}}})
	if code != 200 || res["success"] != true {
		t.Fatalf("add_pet: %d %v", code, res)
	}
	got := seen()
	if len(got) != 2 || got[0].RequestURI != "/api/pets?tags=a+b&tags=c&limit=2" || got[1].Method != "POST" || got[1].Body != `{"name":"Tom"}` {
		t.Errorf("the fake got %+v", got)
	}
}

// TestOpenAPIImportErrors refuses bad input with a specific error and
// registers nothing.
func TestOpenAPIImportErrors(t *testing.T) {
	// An operation whose body schema is over the registry's 64 KiB limit,
	// beside a good one: the whole import is refused.
	enum := make([]string, 6000)
	for i := range enum {
		enum[i] = fmt.Sprintf("value-%06d", i)
	}
	big := map[string]any{
		"openapi": "3.0.3", "info": map[string]any{"title": "Big", "version": "1"},
		"servers": []any{map[string]any{"url": "https://big.example.com"}},
		"paths": map[string]any{
			"/ok": map[string]any{"get": map[string]any{"operationId": "fine", "responses": map[string]any{"200": map[string]any{"description": "ok"}}}},
			"/big": map[string]any{"post": map[string]any{"operationId": "tooBig", "responses": map[string]any{"200": map[string]any{"description": "ok"}},
				"requestBody": map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "string", "enum": enum}}}}}},
		},
	}
	cases := []struct {
		name       string
		role       string
		body       any
		wantStatus int
		wantCode   string
		wantInBody []string
	}{
		{"not JSON or YAML", "admin", map[string]any{"document": "openapi: [3.0\n  : :"}, 422, "VALIDATION_ERROR", []string{`"pointer":"/document"`, "neither JSON nor YAML"}},
		{"not OpenAPI", "admin", map[string]any{"document": map[string]any{"hello": "world"}}, 422, "VALIDATION_ERROR", []string{"not an OpenAPI 3 or Swagger 2 document"}},
		{"not a document at all", "admin", map[string]any{"document": []any{1, 2}}, 422, "VALIDATION_ERROR", []string{"must be the document as a JSON object"}},
		{"invalid OpenAPI", "admin", map[string]any{"document": map[string]any{"openapi": "3.0.3", "paths": map[string]any{}}}, 422, "VALIDATION_ERROR", []string{"is not a valid OpenAPI document"}},
		{"both document and url", "admin", map[string]any{"document": pingDocument, "url": "https://example.com/openapi.json"}, 422, "VALIDATION_ERROR", []string{"exactly one of document and url"}},
		{"neither document nor url", "admin", map[string]any{"dry_run": true}, 422, "VALIDATION_ERROR", []string{"send the OpenAPI document"}},
		{"url to an internal address", "admin", map[string]any{"url": "http://127.0.0.1:1/openapi.json"}, 422, "VALIDATION_ERROR", []string{`"pointer":"/url"`, "loopback"}},
		{"bad prefix", "admin", map[string]any{"document": pingDocument, "prefix": "Shop-"}, 422, "VALIDATION_ERROR", []string{`"pointer":"/prefix"`}},
		{"bad base_url", "admin", map[string]any{"document": pingDocument, "base_url": "ftp://x"}, 422, "VALIDATION_ERROR", []string{`"pointer":"/base_url"`}},
		{"relative server without base_url", "admin", map[string]any{"document": strings.Replace(pingDocument, "https://ping.example.com", "/v1", 1)}, 422, "VALIDATION_ERROR", []string{`"pointer":"/base_url"`, "relative"}},
		{"unknown field", "admin", map[string]any{"document": pingDocument, "overwrite": true}, 400, "INVALID_REQUEST", []string{"overwrite"}},
		{"schema the registry refuses", "admin", map[string]any{"document": big}, 422, "VALIDATION_ERROR", []string{`"pointer":"/document/paths/~1big/post"`, "tool too_big", "at most 65536"}},
		{"agent", "agent", map[string]any{"document": pingDocument}, 403, "FORBIDDEN", nil},
		{"reviewer", "reviewer", map[string]any{"document": pingDocument}, 403, "FORBIDDEN", nil},
	}
	app := newTestApp(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := app.do(t, tc.role, "POST", importPath, tc.body)
			if r.Status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.wantStatus, r.Body)
			}
			if code := r.JSON(t)["error"].(map[string]any)["code"]; code != tc.wantCode {
				t.Errorf("code %v, want %s", code, tc.wantCode)
			}
			for _, s := range tc.wantInBody {
				if !strings.Contains(string(r.Body), s) {
					t.Errorf("body lacks %q: %s", s, r.Body)
				}
			}
		})
	}
	for _, name := range []string{"ping", "fine", "too_big"} {
		if r := app.do(t, "admin", "GET", "/api/v1/tools/"+name, nil); r.Status != http.StatusNotFound {
			t.Errorf("%s was registered: %d", name, r.Status)
		}
	}
	// The dry run of the refused document shows the problem at its
	// operation and the good one's tool.
	dry := app.do(t, "admin", "POST", importPath, map[string]any{"document": big, "dry_run": true})
	var res catalog.OpenAPIImportResult
	if err := json.Unmarshal(dry.Body, &res); err != nil || dry.Status != 200 || len(res.Operations) != 2 {
		t.Fatalf("dry run: %d %s", dry.Status, dry.Body)
	}
	for _, op := range res.Operations {
		if (len(op.Problems) > 0) != (op.OperationID == "tooBig") {
			t.Errorf("%s: problems %v", op.OperationID, op.Problems)
		}
	}
}

// TestOpenAPIImportConflict imports only new names: a second import of the
// same document is 409 and changes nothing; a prefix makes it new.
func TestOpenAPIImportConflict(t *testing.T) {
	app := newTestApp(t)
	if r := app.do(t, "admin", "POST", importPath, map[string]any{"document": pingDocument}); r.Status != 201 {
		t.Fatalf("first import: %d %s", r.Status, r.Body)
	}
	r := app.do(t, "admin", "POST", importPath, map[string]any{"document": pingDocument})
	if r.Status != http.StatusConflict || !strings.Contains(string(r.Body), "ping") {
		t.Errorf("second import: %d %s", r.Status, r.Body)
	}
	if vs := app.do(t, "admin", "GET", "/api/v1/tools/ping/versions", nil).JSON(t)["versions"].([]any); len(vs) != 1 {
		t.Errorf("versions after the refused import: %v", vs)
	}
	dry := app.do(t, "admin", "POST", importPath, map[string]any{"document": pingDocument, "dry_run": true})
	if dry.Status != 200 || !strings.Contains(string(dry.Body), "already registered") {
		t.Errorf("dry run does not say the name is taken: %d %s", dry.Status, dry.Body)
	}
	if r := app.do(t, "admin", "POST", importPath, map[string]any{"document": pingDocument, "prefix": "again"}); r.Status != 201 || !strings.Contains(string(r.Body), `"again_ping"`) {
		t.Errorf("prefixed import: %d %s", r.Status, r.Body)
	}
}

// TestOpenAPIImportUpdate imports a newer document over an earlier import:
// the changed operations get their next patch version, the new ones are
// registered, the others stay; all in one transaction, and an update that
// changes nothing stores nothing.
func TestOpenAPIImportUpdate(t *testing.T) {
	app := newTestApp(t)
	v1 := petstore(t, "petstore.yaml")
	if r := app.do(t, "admin", "POST", importPath, map[string]any{"document": v1}); r.Status != 201 {
		t.Fatalf("first import: %d %s", r.Status, r.Body)
	}
	// The next release: listPets described anew, a new operation.
	v2 := strings.Replace(v1, "summary: List pets", "summary: List the pets of the store", 1)
	v2 = strings.Replace(v2, "  /pets/{petId}:", `  /health:
    get:
      operationId: health
      responses:
        "200": {description: up}
  /pets/{petId}:`, 1)
	if v2 == v1 || !strings.Contains(v2, "operationId: health") {
		t.Fatal("the test document did not change")
	}
	dry := app.do(t, "admin", "POST", importPath, map[string]any{"document": v2, "update": true, "dry_run": true})
	if dry.Status != 200 || !strings.Contains(string(dry.Body), "changed: list_pets gets version 1.0.1") {
		t.Fatalf("dry run of the update: %d %s", dry.Status, dry.Body)
	}
	if vs := app.do(t, "admin", "GET", "/api/v1/tools/list_pets/versions", nil).JSON(t)["versions"].([]any); len(vs) != 1 {
		t.Fatalf("the dry run stored a version: %v", vs)
	}
	r := app.do(t, "admin", "POST", importPath, map[string]any{"document": v2, "update": true})
	if r.Status != 201 {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	var res struct {
		Registered, Updated, Unchanged []struct{ Name, Version string }
	}
	if err := json.Unmarshal(r.Body, &res); err != nil {
		t.Fatal(err)
	}
	names := func(ts []struct{ Name, Version string }) string {
		var out []string
		for _, x := range ts {
			out = append(out, x.Name+"@"+x.Version)
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	if got := names(res.Registered); got != "health@1.0.0" {
		t.Errorf("registered %s", got)
	}
	if got := names(res.Updated); got != "list_pets@1.0.1" {
		t.Errorf("updated %s", got)
	}
	if len(res.Unchanged) != 4 || strings.Contains(names(res.Unchanged), "list_pets") {
		t.Errorf("unchanged %s", names(res.Unchanged))
	}
	tool := app.do(t, "admin", "GET", "/api/v1/tools/list_pets", nil).JSON(t)
	if tool["version"] != "1.0.1" || !strings.Contains(tool["description"].(string), "List the pets of the store") {
		t.Errorf("list_pets after the update: %v %v", tool["version"], tool["description"])
	}
	// The same document again: nothing changes, 200.
	again := app.do(t, "admin", "POST", importPath, map[string]any{"document": v2, "update": true})
	if again.Status != 200 || strings.Contains(string(again.Body), `"updated"`) || strings.Contains(string(again.Body), `"registered"`) {
		t.Errorf("an update without changes: %d %s", again.Status, again.Body)
	}
	if vs := app.do(t, "admin", "GET", "/api/v1/tools/list_pets/versions", nil).JSON(t)["versions"].([]any); len(vs) != 2 {
		t.Errorf("versions of list_pets: %d, want 2", len(vs))
	}
	// Without update, names taken are still refused.
	if r := app.do(t, "admin", "POST", importPath, map[string]any{"document": v2}); r.Status != http.StatusConflict || !strings.Contains(string(r.Body), "update") {
		t.Errorf("import without update: %d %s", r.Status, r.Body)
	}
}
