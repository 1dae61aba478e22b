package web_test

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"toolbelt/app"
	"toolbelt/internal/nodetest"
	"toolbelt/internal/poll"
	"toolbelt/services/upstream"
)

// nodePackages is the directory that really holds testdata/node's
// node_modules, to mount in the sandbox: testdata/node/node_modules may
// be a link to elsewhere, which the sandbox would not follow, and a clone
// the sandbox's user cannot enter gets a staged copy (nodetest.SandboxDir).
func nodePackages(t testing.TB) string {
	t.Helper()
	return nodetest.SandboxDir(t)
}

// TestUpstreamProcessCaps has one agent call session-isolated stdio
// servers in many sessions, as the attack did (30 session_ids, 22
// node processes): the node processes on the host never exceed the caps,
// the least recently used idle process is stopped for a new session,
// another principal still gets processes of its own, and when every
// process in the way has a call in flight the call is refused 429
// RATE_LIMIT_EXCEEDED with Retry-After, then runs once one is idle.
func TestUpstreamProcessCaps(t *testing.T) {
	t.Parallel() // its own app; its processes carry a mount name of their own
	app := newTestAppWith(t, hostCaps{Sandbox: true}, loopback, func(c *app.Config) {
		c.UpstreamProcesses = upstream.ProcessCaps{PerServer: 3, PerPrincipal: 2}
	})
	needSandbox(t, app)
	mount := "caps" + strconv.Itoa(os.Getpid())
	add := func(name string, command ...string) {
		body := map[string]any{"name": name, "transport": "stdio", "category": "code", "isolation": "session",
			"command": command, "mounts": map[string]string{mount: nodePackages(t)}}
		if r := app.do(t, "admin", "POST", "/api/v1/upstreams", body); r.Status != 201 {
			t.Fatalf("add %s: %d %s", name, r.Status, r.Body)
		}
	}
	at := "/opt/" + mount + "/node_modules/@modelcontextprotocol/"
	memory, everything := at+"server-memory/dist/index.js", at+"server-everything/dist/index.js"
	add("memory", "node", memory)
	add("everything", "node", everything, "stdio")
	app.do(t, "admin", "PUT", "/api/v1/principals/"+itoa(app.ids["agent"])+"/grants", map[string]any{"categories": []string{"code"}})
	call := func(role, session, tool string, args map[string]any) (int, map[string]any, string) {
		t.Helper()
		r := app.do(t, role, "POST", "/api/v1/calls", map[string]any{"tool": tool, "arguments": args, "session_id": session})
		return r.Status, r.JSON(t), r.Header.Get("Retry-After")
	}
	// Each server's shared process (it listed the tools) runs besides
	// the sessions' until idle: the caps bound the sessions'.
	shared := func(marker string) int { return min(processes(marker), 1) }

	// One agent, ten sessions: at most its 2 processes at any time.
	for i := range 10 {
		if code, res, _ := call("agent", "s"+strconv.Itoa(i), "memory__read_graph", map[string]any{}); code != 200 || res["status"] != "succeeded" {
			t.Fatalf("read_graph in s%d: %d %v", i, code, res)
		}
		if n := processes(memory); n > 1+2 {
			t.Fatalf("after session s%d the agent runs %d memory processes; the caps allow 2 and the shared one", i, n)
		}
	}
	// Another principal still gets its own, within the server's 3.
	for _, s := range []string{"a1", "a2", "a3"} {
		if code, res, _ := call("admin", s, "memory__read_graph", map[string]any{}); code != 200 || res["status"] != "succeeded" {
			t.Fatalf("the admin's read_graph in %s: %d %v", s, code, res)
		}
		if n := processes(memory); n > 1+3 {
			t.Fatalf("%d memory processes; the caps allow 3 and the shared one", n)
		}
	}
	// The agent's sessions 8 and 9 are the ones it kept: its 8th session's
	// state is still there (its process was not stopped).
	if code, res, _ := call("agent", "s9", "memory__read_graph", map[string]any{}); code != 200 || res["status"] != "succeeded" {
		t.Errorf("the agent's last session: %d %v", code, res)
	}

	// Every process in the way busy: two long calls hold the agent's two
	// processes of everything; a third session is refused, then runs.
	var wg sync.WaitGroup
	for _, s := range []string{"b1", "b2"} {
		wg.Go(func() {
			if code, res, _ := call("agent", s, "everything__trigger_long_running_operation", map[string]any{"duration": 4, "steps": 2}); code != 200 || res["status"] != "succeeded" {
				t.Errorf("the long call in %s: %d %v", s, code, res)
			}
		})
	}
	poll.True(t, 20*time.Second, "the two long calls' processes start", func() bool { return processes(everything)-shared(everything) >= 2 })
	code, res, retry := call("agent", "b3", "everything__get_sum", map[string]any{"a": 1, "b": 2})
	if code != 429 || errCode(res) != "RATE_LIMIT_EXCEEDED" || retry == "" || !strings.Contains(string(mustJSON(res["error"])), "in flight") {
		t.Errorf("a third session while two calls run: %d %v (Retry-After %q)", code, res, retry)
	}
	if n := processes(everything); n > 1+2 {
		t.Errorf("%d everything processes; the caps allow 2 and the shared one", n)
	}
	wg.Wait()
	if code, res, _ := call("agent", "b3", "everything__get_sum", map[string]any{"a": 1, "b": 2}); code != 200 || res["status"] != "succeeded" {
		t.Errorf("the third session once the calls ended: %d %v", code, res)
	}
	metrics := string(app.do(t, "admin", "GET", "/metrics", nil).Body)
	for _, want := range []string{`toolbelt_upstream_processes_evicted_total{instance=`, `toolbelt_upstream_processes_refused_total{instance=`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s:\n%s", want, grepLines(metrics, "upstream"))
		}
	}
}
