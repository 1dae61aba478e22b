package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestRegisterValidation sends broken definitions and checks that each
// answers 422 naming every problem by JSON pointer, and stores nothing.
func TestRegisterValidation(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	set := func(path string, v any) func(map[string]any) {
		return func(m map[string]any) {
			parts := strings.Split(path, ".")
			cur := m
			for _, p := range parts[:len(parts)-1] {
				cur = cur[p].(map[string]any)
			}
			if v == nil {
				delete(cur, parts[len(parts)-1])
				return
			}
			cur[parts[len(parts)-1]] = v
		}
	}
	deep := map[string]any{"type": "string"}
	for range 40 {
		deep = map[string]any{"type": "object", "properties": map[string]any{"x": deep}}
	}
	huge := map[string]any{}
	for i := range 3000 {
		huge[fmt.Sprintf("field_%04d", i)] = map[string]any{"type": "string", "description": strings.Repeat("x", 20)}
	}
	cases := []struct {
		name string
		def  map[string]any
		want []string // pointers, in order
	}{
		{"missing name", toolDef("", set("name", nil)), []string{"/name"}},
		{"upper-case name", toolDef("Word_Count"), []string{"/name"}},
		{"path in name", toolDef("../etc/passwd"), []string{"/name"}},
		{"look-alike letter", toolDef("w\u043erd_count"), []string{"/name"}}, // Cyrillic о
		{"name too long", toolDef(strings.Repeat("a", 65)), []string{"/name"}},
		{"name the MCP server uses", toolDef("search_tools"), []string{"/name"}},
		{"the other name the MCP server uses", toolDef("call_result"), []string{"/name"}},
		{"bad semver", toolDef("t1", set("version", "1.0")), []string{"/version"}},
		{"no description", toolDef("t1", set("description", "  ")), []string{"/description"}},
		{"long description", toolDef("t1", set("description", strings.Repeat("d", 2049))), []string{"/description"}},
		{"unknown category", toolDef("t1", set("category", "database")), []string{"/category"}},
		{"bad tag", toolDef("t1", set("tags", []any{"ok", "Not OK"})), []string{"/tags/1"}},
		{"root not object", toolDef("t1", set("parameters", map[string]any{"type": "array"})), []string{"/parameters/type", "/runner/argv/3"}},
		{"required names a missing property", toolDef("t1", set("parameters.required", []any{"text", "lang"})), []string{"/parameters/required/1"}},
		{"schema does not compile", toolDef("t1", set("parameters.properties", map[string]any{"text": map[string]any{"type": "strin"}})), []string{"/parameters/properties/text/type"}},
		{"bad pattern", toolDef("t1", set("parameters.properties", map[string]any{"text": map[string]any{"type": "string", "pattern": "(["}})), []string{"/parameters/properties/text/pattern"}},
		{"external ref", toolDef("t1", set("parameters.properties", map[string]any{"text": map[string]any{"$ref": "file:///etc/passwd"}})), []string{"/parameters"}},
		{"other draft", toolDef("t1", set("parameters.$schema", "http://json-schema.org/draft-07/schema#")), []string{"/parameters/$schema"}},
		{"deeply nested schema", toolDef("t1", set("parameters", deep)), []string{"/parameters"}},
		{"huge schema", toolDef("t1", set("parameters.properties", huge)), []string{"/parameters"}},
		{"unknown level", toolDef("t1", set("security.level", "low")), []string{"/security/level"}},
		{"timeout too long", toolDef("t1", set("execution.timeout", 3_600_000)), []string{"/execution/timeout"}},
		{"retries without retryable", toolDef("t1", set("execution.maxRetries", 3)), []string{"/execution/maxRetries"}},
		{"too many retries", toolDef("t1", set("execution", map[string]any{"timeout": 1000, "retryable": true, "maxRetries": 50})), []string{"/execution/maxRetries"}},
		{"timeouts retried without retries", toolDef("t1", set("execution.retryTimeouts", true)), []string{"/execution/retryTimeouts"}},
		{"cache ttl without cacheable", toolDef("t1", set("execution.cacheTTL", 1000)), []string{"/execution/cacheTTL"}},
		{"rate limit out of range", toolDef("t1", set("security.rateLimit", map[string]any{"maxCalls": 0, "windowMs": 10})), []string{"/security/rateLimit/maxCalls", "/security/rateLimit/windowMs"}},
		{"escaping allowed path", toolDef("t1", set("category", "filesystem"), set("security.allowedPaths", []any{"../x", "/etc"})), []string{"/security/allowedPaths/0", "/security/allowedPaths/1"}},
		{"unknown runner kind", toolDef("t1", set("runner", map[string]any{"kind": "lambda"})), []string{"/runner/kind"}},
		{"unknown builtin", toolDef("t1", set("runner", map[string]any{"kind": "builtin", "builtin": "rm_rf"})), []string{"/runner/builtin"}},
		{"command without argv", toolDef("t1", set("runner.argv", nil)), []string{"/runner/argv"}},
		{"placeholder inside an argument", toolDef("t1", set("runner.argv", []any{"wc", "--files={{text}}"})), []string{"/runner/argv/1"}},
		{"placeholder names no parameter", toolDef("t1", set("runner.argv", []any{"wc", "{{file}}"})), []string{"/runner/argv/1"}},
		{"command outside the sandbox", toolDef("t1", set("security.sandbox", false)), []string{"/security/sandbox"}},
		{"http fields on a command", toolDef("t1", set("runner.url", "https://example.com")), []string{"/runner/url"}},
		{"http host from a placeholder", toolDef("t1", set("runner", map[string]any{"kind": "http", "url": "https://{{text}}/v1"})), []string{"/runner/url"}},
		{"http literal secret", toolDef("t1", set("runner", map[string]any{"kind": "http", "url": "https://api.example.com/v1", "headers": map[string]any{"Authorization": "Bearer sk-live-123"}})), []string{"/runner/headers/Authorization"}},
		{"composite calling a missing tool", toolDef("t1", set("runner", map[string]any{"kind": "composite", "steps": []any{map[string]any{"tool": "file_read"}, map[string]any{"tool": "no_such_tool"}}})), []string{"/runner/steps/1/tool"}},
		{"several problems at once", toolDef("Bad", set("version", "x"), set("category", "nope")), []string{"/name", "/version", "/category"}},
		{"property names a provider refuses", toolDef("t1", set("parameters.required", []any{}), set("parameters.properties", map[string]any{"emoji_ü": map[string]any{"type": "string"}, "max-results": map[string]any{"type": "integer"}, "text": map[string]any{"type": "string"}})),
			[]string{"/parameters/properties/emoji_ü", "/parameters/properties/max-results"}},
		{"required and type problems together", toolDef("t1", set("parameters.required", []any{"lang"}), set("parameters.properties", map[string]any{"text": map[string]any{"type": "strng"}})), []string{"/parameters/required/0", "/parameters/properties/text/type"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := app.do(t, "admin", "POST", "/api/v1/tools", tc.def)
			if r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422: %s", r.Status, r.Body)
			}
			if got := problemPointers(t, r); !slices.Equal(got, tc.want) {
				t.Errorf("problems at %v, want %v: %s", got, tc.want, r.Body)
			}
		})
	}
	// Nothing was stored: the catalog still holds only the built-ins.
	if total := app.do(t, "admin", "GET", "/api/v1/tools?include_retired=true", nil).JSON(t)["total"]; total != float64(8) {
		t.Errorf("catalog holds %v tools after rejected registrations, want 8", total)
	}
}

// TestRegisterAcceptsEveryRunnerKind registers one valid tool per kind.
func TestRegisterAcceptsEveryRunnerKind(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	defs := []map[string]any{
		toolDef("word_count"),
		toolDef("weather", func(m map[string]any) {
			m["category"] = "api"
			m["security"] = map[string]any{"level": "safe", "network": true}
			m["runner"] = map[string]any{"kind": "http", "method": "get", "url": "https://api.example.com/weather?q={{text}}",
				"headers": map[string]any{"Authorization": "Bearer {{env.WEATHER_TOKEN}}", "Accept": "application/json"}}
		}),
		toolDef("read_twice", func(m map[string]any) {
			m["runner"] = map[string]any{"kind": "composite", "steps": []any{
				map[string]any{"tool": "file_read", "arguments": map[string]any{"path": "a.txt"}},
				map[string]any{"tool": "file_read", "arguments": map[string]any{"path": "b.txt"}},
			}}
			m["security"] = map[string]any{"level": "safe"}
		}),
		toolDef("notes_read", func(m map[string]any) {
			m["category"] = "filesystem"
			m["security"] = map[string]any{"level": "safe", "allowedPaths": []any{"notes", "docs/public"}}
			m["runner"] = map[string]any{"kind": "builtin", "builtin": "file_read"}
		}),
	}
	for _, def := range defs {
		r := app.do(t, "admin", "POST", "/api/v1/tools", def)
		if r.Status != http.StatusCreated {
			t.Fatalf("register %s: status %d: %s", def["name"], r.Status, r.Body)
		}
		if loc := r.Header.Get("Location"); loc != "/api/v1/tools/"+def["name"].(string) {
			t.Errorf("Location %q", loc)
		}
	}
	// Defaults are filled and stored explicitly; http methods are upper-cased.
	got := app.do(t, "agent", "GET", "/api/v1/tools/weather", nil).JSON(t)["definition"].(map[string]any)
	if got["runner"].(map[string]any)["method"] != "GET" {
		t.Errorf("method not normalised: %v", got["runner"])
	}
	noLevel := toolDef("no_level", func(m map[string]any) { m["security"] = map[string]any{"sandbox": true}; delete(m, "execution") })
	r := app.do(t, "admin", "POST", "/api/v1/tools", noLevel)
	def := r.JSON(t)["definition"].(map[string]any)
	if def["security"].(map[string]any)["level"] != "moderate" || def["execution"].(map[string]any)["timeout"] != float64(30000) {
		t.Errorf("defaults not filled: %s", r.Body)
	}
}

// TestBadInput sends malformed requests: each gets a specific 4xx in the
// one error shape and the server keeps serving.
func TestBadInput(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	valid, _ := json.Marshal(toolDef("word_count"))
	send := func(method, path, contentType string, body []byte) response {
		req, _ := http.NewRequest(method, path, strings.NewReader(string(body)))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		req.Header.Set("Authorization", "Bearer "+app.keys["admin"])
		rec := newRecorder()
		app.handler.ServeHTTP(rec, req)
		return response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
	}
	if r := app.do(t, "admin", "POST", "/api/v1/tools", toolDef("retired_one")); r.Status != 201 {
		t.Fatal(string(r.Body))
	}
	app.do(t, "admin", "DELETE", "/api/v1/tools/retired_one", nil)
	big := append([]byte(`{"name":"x","description":"`), []byte(strings.Repeat("a", 1<<20))...)
	big = append(big, []byte(`"}`)...)
	deepJSON := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	cases := []struct {
		name, method, path, contentType string
		body                            []byte
		status                          int
		code                            string
		message                         string
	}{
		{"malformed JSON", "POST", "/api/v1/tools", "application/json", []byte(`{"name": "x",`), 400, "INVALID_REQUEST", "malformed JSON"},
		{"not JSON at all", "POST", "/api/v1/tools", "application/json", []byte(`name=x`), 400, "INVALID_REQUEST", "malformed JSON"},
		{"wrong content type", "POST", "/api/v1/tools", "text/plain", valid, 415, "UNSUPPORTED_MEDIA_TYPE", "application/json"},
		{"no content type", "POST", "/api/v1/tools", "", valid, 415, "UNSUPPORTED_MEDIA_TYPE", "application/json"},
		{"latin-1 charset", "POST", "/api/v1/tools", "application/json; charset=latin1", valid, 415, "UNSUPPORTED_MEDIA_TYPE", "UTF-8"},
		{"body over 1 MiB", "POST", "/api/v1/tools", "application/json", big, 413, "PAYLOAD_TOO_LARGE", "larger than"},
		{"unknown field", "POST", "/api/v1/tools", "application/json", []byte(strings.Replace(string(valid), `"name"`, `"nmae":"x","name"`, 1)), 400, "INVALID_REQUEST", `"nmae"`},
		{"unknown nested field", "POST", "/api/v1/tools", "application/json", []byte(strings.Replace(string(valid), `"level":"safe"`, `"level":"safe","root":true`, 1)), 400, "INVALID_REQUEST", `"root"`},
		{"wrong type", "POST", "/api/v1/tools", "application/json", []byte(strings.Replace(string(valid), `"timeout":5000`, `"timeout":"5s"`, 1)), 422, "VALIDATION_ERROR", "invalid request body"},
		{"invalid UTF-8", "POST", "/api/v1/tools", "application/json", []byte("{\"name\":\"a\xff\"}"), 400, "INVALID_REQUEST", "UTF-8"},
		{"empty body", "POST", "/api/v1/tools", "application/json", nil, 400, "INVALID_REQUEST", "empty"},
		{"two JSON values", "POST", "/api/v1/tools", "application/json", append(append([]byte{}, valid...), valid...), 400, "INVALID_REQUEST", "more than one"},
		{"array instead of object", "POST", "/api/v1/tools", "application/json", []byte(`[1,2]`), 422, "VALIDATION_ERROR", ""},
		{"absurd nesting", "POST", "/api/v1/tools", "application/json", []byte(deepJSON), 400, "INVALID_REQUEST", ""},
		{"tool name with a slash", "GET", "/api/v1/tools/..%2Fetc", "", nil, 400, "INVALID_REQUEST", "not a tool name"},
		{"tool name with a look-alike", "GET", "/api/v1/tools/" + url.PathEscape("fil\u0435_read"), "", nil, 400, "INVALID_REQUEST", "not a tool name"},
		{"unknown tool", "GET", "/api/v1/tools/no_such_tool", "", nil, 404, "NOT_FOUND", "no_such_tool"},
		{"unknown endpoint", "GET", "/api/v1/nothing", "", nil, 404, "NOT_FOUND", "no endpoint"},
		{"wrong method", "PATCH", "/api/v1/tools", "application/json", valid, 405, "METHOD_NOT_ALLOWED", "PATCH"},
		{"bad limit", "GET", "/api/v1/tools?limit=abc", "", nil, 400, "INVALID_REQUEST", "limit"},
		{"misspelt filter", "GET", "/api/v1/tools?categroy=code", "", nil, 400, "INVALID_REQUEST", `unknown query parameter "categroy"`},
		{"retired tool", "GET", "/api/v1/tools/retired_one", "", nil, 404, "NOT_FOUND", "is retired"},
		{"bad id", "POST", "/api/v1/principals/abc/keys", "", nil, 400, "INVALID_REQUEST", "positive integer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := send(tc.method, tc.path, tc.contentType, tc.body)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %.300s", r.Status, tc.status, r.Body)
			}
			e, ok := r.JSON(t)["error"].(map[string]any)
			if !ok {
				t.Fatalf("no error object: %s", r.Body)
			}
			if e["code"] != tc.code || !strings.Contains(e["message"].(string), tc.message) || e["request_id"] == "" {
				t.Errorf("error %v, want code %s and a message with %q", e, tc.code, tc.message)
			}
		})
	}
	if r := app.do(t, "admin", "POST", "/api/v1/tools", toolDef("word_count")); r.Status != http.StatusCreated {
		t.Fatalf("server stopped serving after bad input: %d %s", r.Status, r.Body)
	}
}

// TestConcurrentRegistration races registrations of one name: exactly one
// wins, the rest are 409, and one tool with one version is stored.
func TestConcurrentRegistration(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	const n = 16
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			statuses[i] = app.do(t, "admin", "POST", "/api/v1/tools", toolDef("racer")).Status
		})
	}
	wg.Wait()
	created := 0
	for _, s := range statuses {
		switch s {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
		default:
			t.Errorf("unexpected status %d", s)
		}
	}
	if created != 1 {
		t.Errorf("%d registrations succeeded, want exactly 1 (%v)", created, statuses)
	}
	vers := app.do(t, "admin", "GET", "/api/v1/tools/racer/versions", nil).JSON(t)["versions"].([]any)
	if len(vers) != 1 {
		t.Errorf("%d versions stored, want 1", len(vers))
	}
}

// TestVersionLifecycle walks publish, history, rollback, retire and restore.
func TestVersionLifecycle(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	mustStatus := func(r response, want int) map[string]any {
		t.Helper()
		if r.Status != want {
			t.Fatalf("status %d, want %d: %s", r.Status, want, r.Body)
		}
		if want == http.StatusNoContent {
			return nil
		}
		return r.JSON(t)
	}
	mustStatus(app.do(t, "admin", "POST", "/api/v1/tools", toolDef("wc")), 201)
	if r := app.do(t, "admin", "POST", "/api/v1/tools", toolDef("wc")); r.Status != http.StatusConflict {
		t.Fatalf("duplicate: %d", r.Status)
	}
	v2 := toolDef("wc", func(m map[string]any) { m["version"] = "1.1.0"; m["description"] = "Count words, second edition." })
	got := mustStatus(app.do(t, "admin", "PUT", "/api/v1/tools/wc", v2), 200)
	if got["version"] != "1.1.0" || got["current"] != true {
		t.Fatalf("publish answered %v", got)
	}
	for _, tc := range []struct {
		name    string
		version string
		status  int
	}{
		{"same version", "1.1.0", 422},
		{"lower version", "1.0.5", 422},
		{"prerelease of the current", "1.1.0-rc.1", 422},
		{"not semver", "v2", 422},
	} {
		t.Run(tc.name, func(t *testing.T) {
			def := toolDef("wc", func(m map[string]any) { m["version"] = tc.version })
			if r := app.do(t, "admin", "PUT", "/api/v1/tools/wc", def); r.Status != tc.status || !slices.Equal(problemPointers(t, r), []string{"/version"}) {
				t.Errorf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
		})
	}
	if r := app.do(t, "admin", "PUT", "/api/v1/tools/wc", toolDef("other", func(m map[string]any) { m["version"] = "9.0.0" })); r.Status != 422 {
		t.Errorf("rename via PUT: %d", r.Status)
	}
	if r := app.do(t, "admin", "PUT", "/api/v1/tools/missing", toolDef("missing", func(m map[string]any) { m["category"] = "bogus" })); r.Status != 404 {
		t.Errorf("publish to a missing tool: %d", r.Status)
	}
	// The old version is immutable and readable.
	old := mustStatus(app.do(t, "agent", "GET", "/api/v1/tools/wc/versions/1.0.0", nil), 200)
	if old["description"] != toolDef("wc")["description"] || old["current"] != false {
		t.Errorf("version 1.0.0 changed: %v", old)
	}
	// Roll back: 1.0.0 is current again, and a new version must still
	// exceed 1.1.0.
	got = mustStatus(app.do(t, "admin", "POST", "/api/v1/tools/wc/rollback", map[string]any{"version": "1.0.0"}), 200)
	if got["version"] != "1.0.0" || got["current"] != true {
		t.Fatalf("rollback answered %v", got)
	}
	if cur := mustStatus(app.do(t, "agent", "GET", "/api/v1/tools/wc", nil), 200); cur["version"] != "1.0.0" {
		t.Errorf("current after rollback: %v", cur["version"])
	}
	if r := app.do(t, "admin", "PUT", "/api/v1/tools/wc", toolDef("wc", func(m map[string]any) { m["version"] = "1.0.1" })); r.Status != 422 {
		t.Errorf("publishing 1.0.1 after a rollback from 1.1.0: %d", r.Status)
	}
	if r := app.do(t, "admin", "POST", "/api/v1/tools/wc/rollback", map[string]any{"version": "3.0.0"}); r.Status != 404 {
		t.Errorf("rollback to a missing version: %d", r.Status)
	}
	if r := app.do(t, "admin", "POST", "/api/v1/tools/wc/rollback", map[string]any{}); r.Status != 422 {
		t.Errorf("rollback without a version: %d", r.Status)
	}
	vers := mustStatus(app.do(t, "agent", "GET", "/api/v1/tools/wc/versions", nil), 200)["versions"].([]any)
	if len(vers) != 2 || vers[0].(map[string]any)["current"] != true || vers[1].(map[string]any)["current"] != false {
		t.Errorf("versions %v", vers)
	}
	// Retire: gone from the catalog and GET, history kept.
	mustStatus(app.do(t, "admin", "DELETE", "/api/v1/tools/wc", nil), 204)
	if r := app.do(t, "admin", "DELETE", "/api/v1/tools/wc", nil); r.Status != 404 {
		t.Errorf("retire twice: %d", r.Status)
	}
	if r := app.do(t, "agent", "GET", "/api/v1/tools/wc", nil); r.Status != 404 {
		t.Errorf("GET a retired tool: %d", r.Status)
	}
	if r := app.do(t, "agent", "GET", "/api/v1/tools?q=wc", nil).JSON(t); r["total"] != float64(0) {
		t.Errorf("retired tool listed: %v", r)
	}
	if r := app.do(t, "agent", "GET", "/api/v1/tools?q=wc&include_retired=true", nil).JSON(t); r["total"] != float64(1) {
		t.Errorf("retired tool missing with include_retired: %v", r)
	}
	mustStatus(app.do(t, "agent", "GET", "/api/v1/tools/wc/versions/1.1.0", nil), 200)
	if r := app.do(t, "admin", "POST", "/api/v1/tools", toolDef("wc")); r.Status != 409 {
		t.Errorf("re-registering a retired name: %d", r.Status)
	}
	// Publishing restores it.
	mustStatus(app.do(t, "admin", "PUT", "/api/v1/tools/wc", toolDef("wc", func(m map[string]any) { m["version"] = "2.0.0" })), 200)
	if cur := mustStatus(app.do(t, "agent", "GET", "/api/v1/tools/wc", nil), 200); cur["version"] != "2.0.0" || cur["retired"] != false {
		t.Errorf("after restore: %v", cur)
	}
}

// TestListAndCategories checks filters, pagination and the category index.
func TestListAndCategories(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	for i := range 5 {
		def := toolDef(fmt.Sprintf("extra_%d", i), func(m map[string]any) {
			m["category"] = "search"
			m["tags"] = []any{"extra", fmt.Sprintf("n%d", i)}
			m["security"] = map[string]any{"level": "dangerous", "sandbox": true}
		})
		if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
			t.Fatal(string(r.Body))
		}
	}
	names := func(r response) []string {
		var out []string
		for _, tl := range r.JSON(t)["tools"].([]any) {
			out = append(out, tl.(map[string]any)["name"].(string))
		}
		return out
	}
	cases := []struct {
		query string
		want  []string
		total float64
	}{
		{"category=filesystem", []string{"file_list", "file_read", "file_write"}, 3},
		{"tag=n3", []string{"extra_3"}, 1},
		{"tag=extr", nil, 0}, // tags match whole
		{"level=dangerous&limit=2", []string{"extra_0", "extra_1"}, 6},
		{"level=dangerous&limit=2&offset=5", []string{"shell_exec"}, 6},
		{"q=CHROMIUM", []string{"browser_navigate"}, 1},
		{"q=100%25", nil, 0}, // LIKE wildcards are literal
		{"category=search&level=safe", []string{"web_search"}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			r := app.do(t, "agent", "GET", "/api/v1/tools?"+tc.query, nil)
			if r.Status != 200 {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			if got := names(r); !slices.Equal(got, tc.want) {
				t.Errorf("tools %v, want %v", got, tc.want)
			}
			if total := r.JSON(t)["total"]; total != tc.total {
				t.Errorf("total %v, want %v", total, tc.total)
			}
		})
	}
	page := app.do(t, "agent", "GET", "/api/v1/tools?limit=5", nil).JSON(t)
	if page["next_offset"] != float64(5) {
		t.Errorf("next_offset %v", page["next_offset"])
	}
	for _, bad := range []string{"category=database", "level=low", "format=xml", "limit=0", "limit=10001", "offset=-1"} {
		if r := app.do(t, "agent", "GET", "/api/v1/tools?"+bad, nil); r.Status != 400 {
			t.Errorf("%s: status %d, want 400", bad, r.Status)
		}
	}
	cats := app.do(t, "reviewer", "GET", "/api/v1/categories", nil).JSON(t)["categories"].([]any)
	want := map[string]float64{"filesystem": 3, "browser": 1, "shell": 1, "search": 6, "code": 1, "api": 1}
	if len(cats) != 6 {
		t.Fatalf("categories %v", cats)
	}
	for _, c := range cats {
		c := c.(map[string]any)
		if want[c["category"].(string)] != c["tools"] {
			t.Errorf("category %v has %v tools, want %v", c["category"], c["tools"], want[c["category"].(string)])
		}
	}
	app.do(t, "admin", "DELETE", "/api/v1/tools/extra_0", nil)
	cats = app.do(t, "reviewer", "GET", "/api/v1/categories", nil).JSON(t)["categories"].([]any)
	if cats[3].(map[string]any)["tools"] != float64(5) {
		t.Errorf("retired tool still counted: %v", cats[3])
	}
}

// TestExportEndpoints checks that listings and single tools come out in
// every format, and that a format listing holds exactly the stored
// renderings.
func TestExportEndpoints(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	for _, format := range []string{"openai", "openai_responses", "anthropic", "gemini", "mcp"} {
		t.Run(format, func(t *testing.T) {
			r := app.do(t, "agent", "GET", "/api/v1/tools?format="+format+"&category=filesystem", nil)
			if r.Status != 200 {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			body := r.JSON(t)
			tools := body["tools"].([]any)
			if body["format"] != format || len(tools) != 3 {
				t.Fatalf("listing %v", body)
			}
			one := app.do(t, "agent", "GET", "/api/v1/tools/file_list?format="+format, nil)
			var single any
			if err := json.Unmarshal(one.Body, &single); err != nil || one.Status != 200 {
				t.Fatalf("single export: %d %s", one.Status, one.Body)
			}
			a, _ := json.Marshal(single)
			b, _ := json.Marshal(tools[0])
			if string(a) != string(b) {
				t.Errorf("single export differs from the listing:\n%s\n%s", a, b)
			}
			if !strings.Contains(string(a), `"file_list"`) {
				t.Errorf("export lacks the tool name: %s", a)
			}
		})
	}
	if r := app.do(t, "agent", "GET", "/api/v1/tools/file_list?format=xml", nil); r.Status != 400 {
		t.Errorf("unknown format on a single tool: %d", r.Status)
	}
}
