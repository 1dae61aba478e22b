package web_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpstreamRootPaths: a filesystem server run with /work as its root
// (the session's directory as it sees it in the sandbox) gets paths
// under /work, which it lists as its allowed directory, as within the
// session; paths that climb out or sit beside the root are still
// refused before the call reaches it.
func TestUpstreamRootPaths(t *testing.T) {
	t.Parallel() // its own app
	app := newTestApp(t)
	needSandbox(t, app)
	body := map[string]any{"name": "files", "transport": "stdio", "category": "filesystem", "isolation": "session",
		"command":      []string{"node", "/opt/pkgs/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", "/work"},
		"mounts":       map[string]string{"pkgs": nodePackages(t)},
		"idle_seconds": 60}
	if r := app.do(t, "admin", "POST", "/api/v1/upstreams", body); r.Status != 201 {
		t.Fatalf("add: %d %s", r.Status, r.Body)
	}
	call := func(tool, path string) (int, map[string]any) {
		t.Helper()
		return app.call(t, "admin", map[string]any{"tool": tool, "arguments": map[string]any{"path": path}, "session_id": "r1"})
	}
	dir := filepath.Join(app.app.Config.DataDir, "sessions", "p1", "r1")
	if code, res := call("files__list_directory", "."); code != 200 || res["status"] != "succeeded" {
		t.Fatalf("list the session: %d %v", code, res)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("kept in r1"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/work/notes.txt", "notes.txt", "/work/./notes.txt"} {
		if code, res := call("files__read_text_file", p); code != 200 || !strings.Contains(string(mustJSON(res)), "kept in r1") {
			t.Errorf("read %s: %d %v", p, code, res)
		}
	}
	if code, res := call("files__list_directory", "/work"); code != 200 || !strings.Contains(string(mustJSON(res)), "notes.txt") {
		t.Errorf("list /work: %d %v", code, res)
	}
	for _, p := range []string{"/work/../etc/passwd", "../etc/passwd", "/workx/y", "/etc/passwd", "/work//etc/passwd", "/work/x/../../etc/passwd", "/proc/1/root/etc/passwd"} {
		code, res := call("files__read_text_file", p)
		if code != 403 || errCode(res) != "PATH_NOT_ALLOWED" || strings.Contains(string(mustJSON(res)), "root:") {
			t.Errorf("read %s: %d %v", p, code, res)
		}
	}
}
