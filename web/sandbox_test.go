package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"toolbelt/app"
	"toolbelt/services/netpolicy"
	"toolbelt/services/sandbox"
)

// needSandbox fails in CI (where .ci/run installs bubblewrap) and skips
// elsewhere when the app has no sandbox.
func needSandbox(t *testing.T, app *testApp) {
	t.Helper()
	if st := app.runners.Sandbox().Status(); !app.runners.Sandbox().Available() {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no sandbox in CI: %s", st.Reason)
		}
		t.Skipf("no sandbox: %s", st.Reason)
	}
}

func data(res map[string]any) map[string]any {
	d, _ := res["data"].(map[string]any)
	return d
}

// TestSandboxedTools runs code_execute, shell_exec (through an approval)
// and a registered command tool in the real sandbox, over HTTP.
func TestSandboxedTools(t *testing.T) {
	app := newTestApp(t)
	needSandbox(t, app)
	code, res := app.call(t, "admin", map[string]any{"tool": "code_execute", "arguments": map[string]any{"language": "python", "code": "import sys; print(6 * 7, sys.stdin.read())", "stdin": "from stdin"}})
	if code != 200 || data(res)["stdout"] != "42 from stdin\n" || data(res)["exit_code"] != float64(0) {
		t.Fatalf("python: %d %v", code, res)
	}
	if _, err := os.Stat("/usr/bin/node"); err == nil {
		_, res = app.call(t, "admin", map[string]any{"tool": "code_execute", "arguments": map[string]any{"language": "javascript", "code": "console.log([1,2,3].map(x => x * 2).join(','))"}})
		if data(res)["stdout"] != "2,4,6\n" {
			t.Errorf("javascript: %v", res)
		}
	}
	// A failing program is a result with its exit code, not an error.
	_, res = app.call(t, "admin", map[string]any{"tool": "code_execute", "arguments": map[string]any{"language": "python", "code": "raise SystemExit(3)"}})
	if res["success"] != true || data(res)["exit_code"] != float64(3) {
		t.Errorf("exit 3: %v", res)
	}
	// Files written by file_write are readable by the sandboxed program,
	// and what it writes is readable by file_read.
	app.call(t, "admin", map[string]any{"tool": "file_write", "session_id": "s1", "arguments": map[string]any{"path": "in/data.txt", "content": "abc"}})
	_, res = app.call(t, "admin", map[string]any{"tool": "code_execute", "session_id": "s1", "arguments": map[string]any{"language": "python",
		"code": "open('out.txt', 'w').write(open('in/data.txt').read().upper())"}})
	if res["success"] != true {
		t.Fatalf("program in the session directory: %v", res)
	}
	if _, res = app.call(t, "admin", map[string]any{"tool": "file_read", "session_id": "s1", "arguments": map[string]any{"path": "out.txt"}}); data(res)["content"] != "ABC" {
		t.Errorf("file written in the sandbox: %v", res)
	}

	// shell_exec is dangerous: it waits for a reviewer, then runs.
	code, res = app.call(t, "admin", map[string]any{"tool": "shell_exec", "arguments": map[string]any{"command": "echo hello from the sandbox"}})
	if code != 202 || errCode(res) != "CONFIRMATION_REQUIRED" {
		t.Fatalf("shell_exec: %d %v", code, res)
	}
	approval := data(res)["approval_id"].(string)
	if r := app.do(t, "reviewer", "POST", "/api/v1/approvals/"+approval+"/approve", map[string]any{"reason": "harmless"}); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	if rec := app.poll(t, "admin", res["call_id"].(string)); rec["status"] != "succeeded" {
		t.Fatalf("approved shell_exec: %v", rec)
	}

	// A command tool: each placeholder is one argument, never shell text.
	def := sayTool()
	if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	_, res = app.call(t, "admin", map[string]any{"tool": "say", "arguments": map[string]any{"text": "hi; cat /etc/shadow $(id)"}})
	if data(res)["stdout"] != "hi; cat /etc/shadow $(id)\n" {
		t.Errorf("command tool: %v", res)
	}
}

// TestSandboxLimitsOverHTTP: limits hit become SANDBOX_LIMIT results
// naming them, and the server keeps answering meanwhile.
func TestSandboxLimitsOverHTTP(t *testing.T) {
	app := newTestApp(t)
	needSandbox(t, app)
	cases := []struct{ name, code, limit string }{
		{"a 1 GiB allocation", "b = b'x' * (1 << 30)", "memory"},
		{"a fork bomb", "import os\nwhile True:\n    os.fork()", "processes"},
		{"endless output", "while True:\n    print('y' * 1000)", "output"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var wg sync.WaitGroup
			var code int
			var res map[string]any
			wg.Go(func() {
				code, res = app.call(t, "admin", map[string]any{"tool": "code_execute", "arguments": map[string]any{"language": "python", "code": tc.code}})
			})
			// The server answers while the program runs.
			if r := app.do(t, "admin", "GET", "/healthz", nil); r.Status != 200 {
				t.Errorf("healthz during %s: %d", tc.name, r.Status)
			}
			wg.Wait()
			e, _ := res["error"].(map[string]any)
			if code != 200 || errCode(res) != "SANDBOX_LIMIT" || !strings.Contains(e["message"].(string), tc.limit+" limit") || e["suggestion"] == "" {
				t.Fatalf("%d %v", code, res)
			}
		})
	}
}

// TestSandboxUnavailable: a tool that needs the sandbox never runs without
// one.
func TestSandboxUnavailable(t *testing.T) {
	// The host claims a sandbox (the tool is offered); the runners have none.
	app := newTestAppWith(t, hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true}, netpolicy.Policy{},
		func(c *app.Config) { c.Sandbox = sandbox.None })
	_, res := app.call(t, "admin", map[string]any{"tool": "code_execute", "arguments": map[string]any{"language": "python", "code": "print(1)"}})
	if errCode(res) != "SANDBOX_UNAVAILABLE" || res["success"] != false {
		t.Fatalf("%v", res)
	}
}

// TestWebSearch queries a fake SearXNG on 127.0.0.1.
func TestWebSearch(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.Path + "?" + r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"query":"go","results":[{"title":"Go","url":"https://go.dev/","content":"The Go language"},{"title":"Tour","url":"https://go.dev/tour","content":"A tour"},{"title":"Third","url":"https://example.com/","content":"x"}]}`)
	}))
	defer srv.Close()
	app := newTestAppWith(t, hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true}, netpolicy.Policy{},
		func(c *app.Config) { c.SearXNG = srv.URL + "/" })
	code, res := app.call(t, "admin", map[string]any{"tool": "web_search", "arguments": map[string]any{"query": "go lang", "max_results": 2}})
	results, _ := data(res)["results"].([]any)
	if code != 200 || len(results) != 2 || results[0].(map[string]any)["url"] != "https://go.dev/" || results[1].(map[string]any)["snippet"] != "A tour" {
		t.Fatalf("%d %v", code, res)
	}
	if got != "/search?format=json&q=go+lang" {
		t.Errorf("request %q", got)
	}
}

// TestHTTPRunner registers an http tool with URL, header and body
// templates and calls it against a local server.
func TestHTTPRunner(t *testing.T) {
	var path, query, auth, body string
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		path, query, auth = r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Authorization")
		raw := make([]byte, 1024)
		n, _ := r.Body.Read(raw)
		body = string(raw[:n])
		fmt.Fprintf(w, `{"echo":%q}`, auth)
	}))
	defer srv.Close()
	local := netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	allHost := hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true}
	app := newTestAppWith(t, allHost, local,
		func(c *app.Config) { c.Secrets["TB_TEST_TOKEN"] = "test-configured-secret" })
	def := toolDef("create_item", func(m map[string]any) {
		m["category"] = "api"
		m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{
			"id": map[string]any{"type": "string"}, "q": map[string]any{"type": "string"}, "count": map[string]any{"type": "integer"}}, "required": []any{"id"}}
		m["runner"] = map[string]any{"kind": "http", "method": "POST", "url": srv.URL + "/items/{{id}}?q={{q}}",
			"headers": map[string]any{"Authorization": "Bearer {{env.TB_TEST_TOKEN}}"}, "body": `{"name": {{id}}, "n": {{count}}}`}
	})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	code, res := app.call(t, "admin", map[string]any{"tool": "create_item", "arguments": map[string]any{"id": "a/b c", "q": "x&y", "count": 3}})
	if code != 200 || res["success"] != true {
		t.Fatalf("%d %v", code, res)
	}
	if path != "/items/a%2Fb%20c" || query != "q=x%26y" || auth != "Bearer test-configured-secret" || body != `{"name": "a/b c", "n": 3}` {
		t.Errorf("request: path %q query %q auth %q body %q", path, query, auth, body)
	}
	if strings.Contains(data(res)["body"].(string), "test-configured-secret") {
		t.Errorf("the secret came back unredacted: %v", res)
	}
	// A secret that is not configured is never read from the environment.
	// The call fails before any request leaves.
	t.Setenv("TB_TEST_TOKEN", "test-configured-secret")
	unset := newTestAppWith(t, allHost, local)
	if r := unset.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	before := requests.Load()
	if _, res := unset.call(t, "admin", map[string]any{"tool": "create_item", "arguments": map[string]any{"id": "a"}}); errCode(res) != "EXECUTION_FAILED" || requests.Load() != before {
		t.Errorf("unconfigured secret: %v (%d requests sent)", res, requests.Load()-before)
	}
	// A placeholder used in the path and the query is escaped for each.
	def = toolDef("lookup", func(m map[string]any) {
		m["category"] = "api"
		m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}, "required": []any{"id"}}
		m["runner"] = map[string]any{"kind": "http", "method": "GET", "url": srv.URL + "/items/{{id}}?again={{id}}"}
	})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	if _, res := app.call(t, "admin", map[string]any{"tool": "lookup", "arguments": map[string]any{"id": "a b&c"}}); res["success"] != true || path != "/items/a%20b&c" || query != "again=a+b%26c" {
		t.Errorf("path %q query %q: %v", path, query, res)
	}
}

// sayTool is a command tool that echoes its text in the sandbox.
func sayTool() map[string]any {
	return toolDef("say", func(m map[string]any) {
		m["category"] = "shell"
		m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []any{"text"}}
		m["security"] = map[string]any{"level": "safe", "sandbox": true}
		m["runner"] = map[string]any{"kind": "command", "argv": []any{"echo", "{{text}}"}}
	})
}

// TestShellTimeout: a shell command past its timeout_seconds ends with
// TIMEOUT, the code of every call that ran out of time (it was
// SANDBOX_LIMIT "time limit" while the README said TIMEOUT), and like
// every timeout it is not retryable.
func TestShellTimeout(t *testing.T) {
	app := newTestApp(t)
	needSandbox(t, app)
	def := toolDef("sleeper", func(m map[string]any) {
		m["category"] = "shell"
		m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{
			"command": map[string]any{"type": "string"}, "timeout_seconds": map[string]any{"type": "integer"}}, "required": []any{"command"}}
		m["security"] = map[string]any{"level": "moderate", "sandbox": true}
		m["runner"] = map[string]any{"kind": "builtin", "builtin": "shell_exec"}
	})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	_, res := app.call(t, "admin", map[string]any{"tool": "sleeper", "arguments": map[string]any{"command": "sleep 30", "timeout_seconds": 1}})
	e, _ := res["error"].(map[string]any)
	if errCode(res) != "TIMEOUT" || !strings.Contains(e["message"].(string), "timeout_seconds") || e["retryable"] != false {
		t.Fatalf("%v", res)
	}
}
