package web_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"toolbelt/internal/poll"
	"toolbelt/services/upstream"
)

// stdioServer registers a server from testdata/node's packages, run by
// node inside the sandbox, testdata/node shown read-only at /opt/node.
func stdioServer(t *testing.T, app *testApp, name, category, isolation string, command []string, env map[string]string, idle int) map[string]any {
	t.Helper()
	body := map[string]any{"name": name, "transport": "stdio", "category": category, "isolation": isolation,
		"command": command, "mounts": map[string]string{"node": nodePackages(t)}, "env": env, "idle_seconds": idle}
	r := app.do(t, "admin", "POST", "/api/v1/upstreams", body)
	if r.Status != 201 {
		t.Fatalf("add %s: %d %s", name, r.Status, r.Body)
	}
	return r.JSON(t)
}

const serversAt = "/opt/node/node_modules/@modelcontextprotocol/"

// TestUpstreamStdio runs real MCP servers from npm over stdio in the
// sandbox, behind the running server: server-everything shared by every
// call, server-memory and server-filesystem one process per session, in
// the session's work directory. An agent's sessions do not see each
// other's state; links planted in a session and paths that climb do not
// reach another principal's files; a destructive tool waits for a
// reviewer; a server that crashes mid-call fails that call and starts
// again on the next.
func TestUpstreamStdio(t *testing.T) {
	app := newTestApp(t)
	needSandbox(t, app)
	stdioServer(t, app, "everything", "api", "shared", []string{"node", serversAt + "server-everything/dist/index.js", "stdio"}, nil, 0)
	stdioServer(t, app, "memory", "code", "session", []string{"node", serversAt + "server-memory/dist/index.js"},
		map[string]string{"MEMORY_FILE_PATH": "/work/memory.jsonl"}, 0)
	stdioServer(t, app, "files", "filesystem", "session", []string{"node", serversAt + "server-filesystem/dist/index.js", "/work"}, nil, 1)
	app.do(t, "admin", "PUT", "/api/v1/principals/"+itoa(app.ids["agent"])+"/grants", map[string]any{"categories": []string{"api", "code", "filesystem"}})
	call := func(role, session, tool string, args map[string]any) (int, map[string]any) {
		t.Helper()
		return app.call(t, role, map[string]any{"tool": tool, "arguments": args, "session_id": session})
	}

	if code, res := call("agent", "s1", "everything__get_sum", map[string]any{"a": 40, "b": 2}); code != 200 || !strings.Contains(string(mustJSON(res["data"])), "42") {
		t.Fatalf("get_sum over stdio: %d %v", code, res)
	}

	// One memory per session: what s1 stores, s2 does not see; it is a
	// file in s1's work directory.
	if code, res := call("agent", "s1", "memory__create_entities", map[string]any{"entities": []any{
		map[string]any{"name": "Ada", "entityType": "person", "observations": []any{"writes programs"}}}}); code != 200 || res["status"] != "succeeded" {
		t.Fatalf("create_entities: %d %v", code, res)
	}
	_, s1 := call("agent", "s1", "memory__read_graph", map[string]any{})
	_, s2 := call("agent", "s2", "memory__read_graph", map[string]any{})
	if !strings.Contains(string(mustJSON(s1)), "Ada") || strings.Contains(string(mustJSON(s2)), "Ada") {
		t.Errorf("sessions share a memory:\ns1 %v\ns2 %v", s1, s2)
	}
	agentDir := filepath.Join(app.app.Config.DataDir, "sessions", "p"+itoa(app.ids["agent"]))
	if raw, err := os.ReadFile(filepath.Join(agentDir, "s1", "memory.jsonl")); err != nil || !strings.Contains(string(raw), "Ada") {
		t.Errorf("the memory file in s1's work directory: %q %v", raw, err)
	}
	// A destructive tool waits for a reviewer.
	if code, res := call("agent", "s1", "memory__delete_entities", map[string]any{"entityNames": []any{"Ada"}}); code != 202 || errCode(res) != "CONFIRMATION_REQUIRED" {
		t.Errorf("delete_entities: %d %v", code, res)
	}

	// Files: the session's own, and nothing of another principal's
	// (write_file says it is destructive: the admin lets it run without a
	// reviewer).
	if r := app.do(t, "admin", "PUT", "/api/v1/upstreams/files/tools/write_file", map[string]any{"level": "moderate"}); r.Status != 200 {
		t.Fatalf("override: %d %s", r.Status, r.Body)
	}
	if code, res := call("admin", "mine", "files__write_file", map[string]any{"path": "secret.txt", "content": "the admin's secret"}); code != 200 || res["status"] != "succeeded" {
		t.Fatalf("write_file: %d %v", code, res)
	}
	if code, res := call("agent", "s3", "files__write_file", map[string]any{"path": "notes.txt", "content": "hello from s3"}); code != 200 || res["status"] != "succeeded" {
		t.Fatalf("write_file: %d %v", code, res)
	}
	if _, res := call("agent", "s3", "files__read_text_file", map[string]any{"path": "notes.txt"}); !strings.Contains(string(mustJSON(res)), "hello from s3") {
		t.Errorf("read_text_file: %v", res)
	}
	adminSecret := filepath.Join(app.app.Config.DataDir, "sessions", "p1", "mine", "secret.txt")
	s3 := filepath.Join(agentDir, "s3")
	for name, target := range map[string]string{"host-path": adminSecret, "climb": "../../p1/mine/secret.txt", "proc-root": "/proc/1/root" + adminSecret} {
		if err := os.Symlink(target, filepath.Join(s3, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{"host-path", "climb", "proc-root", "../../p1/mine/secret.txt", "/work/../../p1/mine/secret.txt", adminSecret, "%2e%2e/%2e%2e/p1/mine/secret.txt"} {
		code, res := call("agent", "s3", "files__read_text_file", map[string]any{"path": path})
		if strings.Contains(string(mustJSON(res)), "the admin's secret") {
			t.Errorf("%s read another principal's file: %d %v", path, code, res)
		}
	}

	// Idle for a second, the files servers stop (the sweep, which App.Run
	// runs every upstream.SweepEvery, run here as if 2 s later); the next
	// call starts one again.
	app.app.Upstreams.Sweep(time.Now().Add(2 * time.Second))
	poll.Until(t, 10*time.Second, "the idle files servers stopped", func() (bool, string) {
		n := processes("server-filesystem/dist/index.js")
		return n == 0, fmt.Sprintf("%d running", n)
	})
	if _, res := call("agent", "s3", "files__read_text_file", map[string]any{"path": "notes.txt"}); !strings.Contains(string(mustJSON(res)), "hello from s3") {
		t.Errorf("read_text_file after the idle stop: %v", res)
	}

	// Readiness and metrics name the servers.
	ready := app.do(t, "none", "GET", "/readyz", nil)
	if !strings.Contains(string(ready.Body), `"upstreams":{"status":"ok","detail":"everything (stdio): 1 connection; files (stdio)`) {
		t.Errorf("readyz: %s", ready.Body)
	}
	metrics := string(app.do(t, "admin", "GET", "/metrics", nil).Body)
	// memory: the process that listed its tools, and one per session.
	for _, want := range []*regexp.Regexp{regexp.MustCompile(`toolbelt_upstream_connections\{[^}]*server="memory"\} 3\n`),
		regexp.MustCompile(`toolbelt_upstream_memory_bytes\{[^}]*server="everything"\} [1-9]`)} {
		if !want.MatchString(metrics) {
			t.Errorf("/metrics has no %s:\n%s", want, grepLines(metrics, "upstream"))
		}
	}

	// A server that crashes mid-call is started again: the call of a
	// read-only tool (retryable) is tried again on the new process; the
	// crash is in its stages.
	done := make(chan map[string]any, 1)
	go func() {
		_, res := call("agent", "s1", "everything__trigger_long_running_operation", map[string]any{"duration": 3, "steps": 3})
		done <- res
	}()
	pid := waitForProcess(t, "server-everything/dist/index.js")
	time.Sleep(300 * time.Millisecond) // the call is under way
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		rec := app.poll(t, "agent", res["call_id"].(string))
		if res["status"] != "succeeded" || res["metadata"].(map[string]any)["attempts"] != float64(2) ||
			!strings.Contains(string(mustJSON(rec["stages"])), `{"error":"EXECUTION_FAILED","n":1,"stage":"attempt"`) {
			t.Errorf("the call whose server crashed: %v\n%v", res, rec["stages"])
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the call whose server crashed did not end")
	}
	if again := waitForProcess(t, "server-everything/dist/index.js"); again == pid {
		t.Errorf("the crashed server's pid %d is still there", pid)
	}
}

// processes counts the processes whose command line holds marker.
func processes(marker string) int {
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		raw, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(raw), marker) && strings.HasPrefix(string(raw), "node") {
			n++
		}
	}
	return n
}

// waitForProcess returns the pid of the process whose command line holds
// marker, once there is one.
func waitForProcess(t *testing.T, marker string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			raw, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if strings.Contains(string(raw), marker) && strings.HasPrefix(string(raw), "node") {
				return pid
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no process runs %s", marker)
	return 0
}

// TestUpstreamTryLeavesNothing: testing a stdio server's connection (the
// console's "test the connection") runs it in a work directory of its
// own, removed afterwards, whether the server answered or not.
func TestUpstreamTryLeavesNothing(t *testing.T) {
	app := newTestApp(t)
	needSandbox(t, app)
	spec := upstream.Spec{Name: "everything", Transport: "stdio", Category: "api", Mounts: map[string]string{"node": nodePackages(t)},
		Command: []string{"node", serversAt + "server-everything/dist/index.js", "stdio"}}
	if tools, err := app.app.Upstreams.Try(t.Context(), spec); err != nil || !slices.Contains(tools, "echo") {
		t.Fatalf("try: %v %v", tools, err)
	}
	spec.Command = []string{"node", "/opt/node/no-such-server.js"}
	if _, err := app.app.Upstreams.Try(t.Context(), spec); err == nil || !strings.Contains(err.Error(), "MODULE_NOT_FOUND") {
		t.Errorf("a server that does not start: %v", err)
	}
	entries, err := os.ReadDir(filepath.Join(app.app.Config.DataDir, "upstreams"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("a tried server left %s behind", e.Name())
	}
	if r := app.do(t, "admin", "GET", "/api/v1/upstreams", nil); r.Status != 200 || string(r.Body) != "[]" {
		t.Errorf("a tried server was stored: %s", r.Body)
	}
}
