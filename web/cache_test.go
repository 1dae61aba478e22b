package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestResultsCacheIsPerCaller is issue 39's attack on the results cache:
// a cacheable tool of every runner kind reads agent 1's own notes.txt;
// agent 2, and agent 1 in another session, then make the same call. Each
// must run it and get its own file, never cached: true or agent 1's text.
// Only an http tool, free of per-caller state, answers everyone from one
// run (the server counts its requests).
func TestResultsCacheIsPerCaller(t *testing.T) {
	var fetched atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		_, _ = w.Write([]byte("the public note " + r.URL.Path))
	}))
	t.Cleanup(srv.Close)
	app := newTestAppWith(t, hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true}, loopback)
	needSandbox(t, app)
	for _, name := range []string{"agent-1", "agent-2"} {
		app.addAgent(t, name, "filesystem", "shell", "code", "api")
	}
	cacheable := func(category string, runner map[string]any) func(map[string]any) {
		return func(m map[string]any) {
			m["category"] = category
			m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []any{"path"}}
			m["execution"] = map[string]any{"timeout": 5000, "cacheable": true, "cacheTTL": 60000}
			m["runner"] = runner
			if runner["kind"] != "command" {
				m["security"] = map[string]any{"level": "safe"}
			}
		}
	}
	for name, edit := range map[string]func(map[string]any){
		"cat_shell":    cacheable("shell", map[string]any{"kind": "command", "argv": []any{"cat", "--", "{{path}}"}}),
		"cat_code":     cacheable("code", map[string]any{"kind": "command", "argv": []any{"cat", "--", "{{path}}"}}),
		"read_via":     cacheable("api", map[string]any{"kind": "composite", "steps": []any{map[string]any{"tool": "file_read", "arguments": map[string]any{"path": ref("#/input/path")}}}}),
		"public_note":  cacheable("api", map[string]any{"kind": "http", "method": "GET", "url": srv.URL + "/{{path}}"}),
		"public_note2": cacheable("api", map[string]any{"kind": "http", "method": "GET", "url": srv.URL + "/2/{{path}}", "headers": map[string]any{"Authorization": "Bearer {{env.TB_TEST_SECRET}}"}}),
	} {
		if r := app.do(t, "admin", "POST", "/api/v1/tools", toolDef(name, edit)); r.Status != http.StatusCreated {
			t.Fatalf("register %s: %d %s", name, r.Status, r.Body)
		}
	}

	type caller struct{ who, session, text string }
	callers := []caller{{"agent-1", "s1", "agent 1's own note"}, {"agent-2", "s1", "agent 2's note"}, {"agent-1", "s2", "agent 1's other session"}}
	for _, c := range callers {
		if code, res := app.call(t, c.who, map[string]any{"tool": "file_write", "session_id": c.session, "arguments": map[string]any{"path": "notes.txt", "content": c.text}}); code != 200 || res["success"] != true {
			t.Fatalf("%s writes notes.txt in %s: %d %v", c.who, c.session, code, res)
		}
	}
	for _, tool := range []string{"file_read", "cat_shell", "cat_code", "read_via"} {
		t.Run(tool, func(t *testing.T) {
			// Agent 1 first, then the others with the same arguments, then
			// agent 1 again: its own repeat is the only hit.
			for i, c := range append(callers, callers[0]) {
				code, res := app.call(t, c.who, map[string]any{"tool": tool, "session_id": c.session, "arguments": map[string]any{"path": "notes.txt"}})
				body := fmt.Sprint(res["data"])
				if code != 200 || res["success"] != true || !strings.Contains(body, c.text) {
					t.Fatalf("%s in %s: %d %v", c.who, c.session, code, res)
				}
				for _, other := range callers {
					if other.text != c.text && strings.Contains(body, other.text) {
						t.Errorf("%s in %s got %q: %v", c.who, c.session, other.text, res)
					}
				}
				if cached, want := res["metadata"].(map[string]any)["cached"], i == len(callers); cached != want {
					t.Errorf("%s in %s: cached %v, want %v", c.who, c.session, cached, want)
				}
			}
		})
	}
	// The http tools send nothing of the caller's: one request answers all.
	for _, tool := range []string{"public_note", "public_note2"} {
		before := fetched.Load()
		for i, c := range callers {
			code, res := app.call(t, c.who, map[string]any{"tool": tool, "session_id": c.session, "arguments": map[string]any{"path": "notes.txt"}})
			if code != 200 || res["success"] != true || !strings.Contains(fmt.Sprint(res["data"]), "the public note") {
				t.Fatalf("%s %s in %s: %d %v", tool, c.who, c.session, code, res)
			}
			if cached := res["metadata"].(map[string]any)["cached"]; cached != (i > 0) {
				t.Errorf("%s %s in %s: cached %v", tool, c.who, c.session, cached)
			}
		}
		if n := fetched.Load() - before; n != 1 {
			t.Errorf("%s: the server was asked %d times, want once", tool, n)
		}
	}
}

// addAgent creates an agent named name, granted categories, whose key and
// id the app keeps under its name.
func (a *testApp) addAgent(t *testing.T, name string, categories ...string) {
	t.Helper()
	r := a.do(t, "admin", "POST", "/api/v1/principals", map[string]any{"name": name, "role": "agent"})
	if r.Status != http.StatusCreated {
		t.Fatalf("create %s: %d %s", name, r.Status, r.Body)
	}
	p := r.JSON(t)
	a.keys[name], a.ids[name] = p["key"].(string), uint(p["id"].(float64))
	if r := a.do(t, "admin", "PUT", fmt.Sprintf("/api/v1/principals/%d/grants", a.ids[name]), map[string]any{"categories": categories}); r.Status != 200 {
		t.Fatalf("grants of %s: %d %s", name, r.Status, r.Body)
	}
}
