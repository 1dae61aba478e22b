package web_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"toolbelt/app"
	"toolbelt/services/netpolicy"
)

// hostEntry is what the host sees of one path: enough to tell that
// nothing was created, written or chowned.
type hostEntry struct {
	mode     fs.FileMode
	uid, gid uint32
	size     int64
	mtime    time.Time
}

func snapshot(t *testing.T, root string) map[string]hostEntry {
	t.Helper()
	out := map[string]hostEntry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		out[p] = hostEntry{info.Mode(), st.Uid, st.Gid, info.Size(), info.ModTime()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, before, after map[string]hostEntry) {
	t.Helper()
	for p, b := range before {
		if a, ok := after[p]; !ok {
			t.Errorf("%s: %s was removed", what, p)
		} else if a != b {
			t.Errorf("%s: %s changed: %+v → %+v", what, p, b, a)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s: %s was created", what, p)
		}
	}
}

// TestSessionIsolationAttack is issue 14's attack, made as it was made:
// agents name sessions that are not one directory of their own, plant
// links from inside the sandbox (to /, /etc, a directory outside the data
// directory, another principal's directory, the sessions root), find
// links planted under data/ by someone else, and then call every file
// tool and code_execute through them, over the API and over MCP. The
// host side is checked: nothing outside A's directory is read, written,
// listed or chowned.
func TestSessionIsolationAttack(t *testing.T) {
	app := newTestApp(t)
	needSandbox(t, app)
	dataDir := filepath.Dir(app.dbPath)
	sessions := filepath.Join(dataDir, "sessions")
	for _, name := range []string{"agent-a", "agent-b"} {
		app.addAgent(t, name, "filesystem", "code")
	}
	pA, pB := fmt.Sprintf("p%d", app.ids["agent-a"]), fmt.Sprintf("p%d", app.ids["agent-b"])

	// B's secret, and a root-only directory outside the data directory.
	if code, res := app.call(t, "agent-b", map[string]any{"tool": "file_write", "session_id": "s", "arguments": map[string]any{"path": "secret.txt", "content": "B-SECRET"}}); code != 200 || res["success"] != true {
		t.Fatalf("B writes: %d %v", code, res)
	}
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.Mkdir(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("HOST-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}

	// 1. Session ids that are not one directory of one's own are refused
	// before anything is made, over the API and over MCP.
	attempts := 0 // logged: the size of the attack matrix
	defer func() { t.Logf("isolation attack matrix: %d attempts", attempts) }()
	bad := []string{"..", ".", "...", ".hidden", "../" + pB, pB + "/s", "s/..", "a\\b", "a\x00b", "%2e%2e", "..%2f", " s", "s ",
		"\u2024\u2024", strings.Repeat("a", 129), "s\n"}
	for _, id := range bad {
		for tool, args := range map[string]map[string]any{
			"file_read":    {"path": pB + "/s/secret.txt"},
			"file_list":    {"path": pB, "recursive": true},
			"file_write":   {"path": pB + "/s/secret.txt", "content": "x"},
			"code_execute": {"language": "python", "code": "print(open('" + pB + "/s/secret.txt').read())"},
		} {
			attempts++
			code, res := app.call(t, "agent-a", map[string]any{"tool": tool, "session_id": id, "arguments": args})
			if code != http.StatusUnprocessableEntity || errCode(res) != "VALIDATION_ERROR" || !strings.Contains(fmt.Sprint(res), "session_id must be") {
				t.Errorf("%s with session %q: %d %v", tool, id, code, res)
			}
		}
	}
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	for _, id := range []string{"..", ".", ".x"} {
		cs, err := mcpConnectWith(t, srv, bearer{key: app.keys["agent-a"], next: http.DefaultTransport, header: http.Header{"Toolbelt-Session": {id}}})
		if err != nil {
			t.Fatal(err)
		}
		attempts++
		r := mcpCall(t, cs, "file_read", map[string]any{"path": pB + "/s/secret.txt"})
		if !r.IsError || strings.Contains(mcpText(t, r), "B-SECRET") || !strings.HasPrefix(mcpText(t, r), "VALIDATION_ERROR") {
			t.Errorf("MCP with Toolbelt-Session %q: %s", id, mcpText(t, r))
		}
		_ = cs.Close()
	}

	// 2. A plants links from inside its sandbox.
	plant := "import os\n" +
		"for name, target in [('root', '/'), ('etc', '/etc'), ('out', " + fmt.Sprintf("%q", outside) + "), ('b', '../" + pB + "'), ('up', '..'), ('upup', '../..'), ('self', '.'), ('shadow', '/etc/shadow')]:\n" +
		"    os.symlink(target, name)\n" +
		"print(sorted(os.listdir('.')))"
	if code, res := app.call(t, "agent-a", map[string]any{"tool": "code_execute", "session_id": "s", "arguments": map[string]any{"language": "python", "code": plant}}); code != 200 || res["success"] != true || data(res)["exit_code"] != float64(0) {
		t.Fatalf("plant links: %d %v", code, res)
	}
	// And someone planted links under data/ itself, where directories the
	// server makes will go: B's principal directory is a link for a
	// principal C that has not called yet, and A's next session is one.
	pC := fmt.Sprintf("p%d", app.ids["agent"])
	if err := os.Symlink(outside, filepath.Join(sessions, pC)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(sessions, pA, "next")); err != nil {
		t.Fatal(err)
	}
	if r := app.do(t, "admin", "PUT", fmt.Sprintf("/api/v1/principals/%d/grants", app.ids["agent"]), map[string]any{"categories": []string{"filesystem", "code"}}); r.Status != 200 {
		t.Fatal(r.Status)
	}
	hostBefore := snapshot(t, outside)
	etcBefore, _ := os.Lstat("/etc")
	bBefore := snapshot(t, filepath.Join(sessions, pB))

	// 3. Every file tool and code_execute through every link, as A, B and
	// C, in every session they might name.
	paths := []string{"root/etc/passwd", "etc/hostname", "shadow", "out/secret.txt", "b/s/secret.txt", "up/" + pB + "/s/secret.txt",
		"upup/toolbelt.db", "self/../" + pB + "/s/secret.txt", "out", "b", "up", "root"}
	leaked := []string{"B-SECRET", "HOST-SECRET", "root:x:0:0", "SQLite format"}
	type attempt struct{ who, session string }
	// A goes first; B's directory is compared before B and C use theirs.
	for _, a := range []attempt{{"agent-a", "s"}, {"agent-a", "next"}, {"agent-a", "fresh"}, {"agent-b", "s"}, {"agent", "s"}} {
		if a.who == "agent-b" {
			sameTree(t, "B's directory after A's calls", bBefore, snapshot(t, filepath.Join(sessions, pB)))
		}
		for _, p := range paths {
			for _, tool := range []string{"file_read", "file_list", "file_write"} {
				args := map[string]any{"path": p, "content": "ATTACK"}
				if tool == "file_list" {
					args = map[string]any{"path": p, "recursive": true}
				}
				attempts++
				_, res := app.call(t, a.who, map[string]any{"tool": tool, "session_id": a.session, "arguments": args})
				body := fmt.Sprint(res)
				for _, l := range leaked {
					if strings.Contains(body, l) {
						t.Errorf("%s %s %s in %s leaked %q: %v", a.who, tool, p, a.session, l, res)
					}
				}
				// In A's session every path starts with a planted link:
				// writing or listing through one never succeeds (elsewhere
				// the same names are A's, B's or C's own plain files).
				if a == (attempt{"agent-a", "s"}) && tool != "file_read" && res["success"] == true {
					t.Errorf("%s %s %s through a link: %v", a.who, tool, p, res)
				}
			}
		}
		// code_execute sees only the work directory: the links lead
		// nowhere on the host.
		targets, _ := json.Marshal([]string{"out/secret.txt", "b/s/secret.txt", "up/" + pB + "/s/secret.txt", outside + "/secret.txt", "/work/../" + pB + "/s/secret.txt", "/proc/1/root/etc/shadow"})
		code := "import os\nfor p in " + string(targets) + ":\n" +
			"    try:\n        print(open(p).read())\n    except Exception as e:\n        print('no', type(e).__name__)\n" +
			"for p in ['out/planted', 'b/s/planted', 'up/planted']:\n" +
			"    try:\n        open(p, 'w').write('ATTACK')\n    except Exception as e:\n        print('no', type(e).__name__)\n"
		attempts += 9 // six reads and three writes inside the program
		_, res := app.call(t, a.who, map[string]any{"tool": "code_execute", "session_id": a.session, "arguments": map[string]any{"language": "python", "code": code}})
		for _, l := range leaked {
			if strings.Contains(fmt.Sprint(res), l) {
				t.Errorf("%s code_execute in %s leaked %q: %v", a.who, a.session, l, res)
			}
		}
	}

	// 4. The host side: the outside directory, /etc and B's directory are
	// as they were (no file created, written, chmodded or chowned).
	sameTree(t, "outside", hostBefore, snapshot(t, outside))
	if etcAfter, _ := os.Lstat("/etc"); etcAfter.Mode() != etcBefore.Mode() || etcAfter.Sys().(*syscall.Stat_t).Uid != etcBefore.Sys().(*syscall.Stat_t).Uid {
		t.Errorf("/etc changed: %v → %v", etcBefore.Mode(), etcAfter.Mode())
	}
	if _, err := os.Stat(filepath.Join(sessions, pA, "out", "planted")); err == nil {
		// (out is a link: Stat follows it to the outside directory.)
		t.Errorf("a file was written through A's link to outside")
	}
	// Every directory the server made is a real directory: principals'
	// belong to the server and can only be traversed by others; sessions
	// belong to the sandbox's uid (or the server) and are private.
	self := uint32(os.Geteuid())
	uid, _, drop := app.runners.Sandbox().Owner()
	entries, _ := os.ReadDir(sessions)
	for _, e := range entries {
		p := filepath.Join(sessions, e.Name())
		info, _ := os.Lstat(p)
		if e.Name() == pC {
			if info.Mode()&fs.ModeSymlink == 0 {
				t.Errorf("%s: the planted link was replaced", p)
			}
			continue
		}
		if strings.HasPrefix(e.Name(), ".probe") {
			continue
		}
		st := info.Sys().(*syscall.Stat_t)
		if !info.IsDir() || st.Uid != self || info.Mode().Perm()&0o066 != 0 {
			t.Errorf("%s: %v owner %d", p, info.Mode(), st.Uid)
		}
		subs, _ := os.ReadDir(p)
		for _, s := range subs {
			sp := filepath.Join(p, s.Name())
			si, _ := os.Lstat(sp)
			if sp == filepath.Join(sessions, pA, "next") {
				continue // the planted link, refused
			}
			sst := si.Sys().(*syscall.Stat_t)
			if !si.IsDir() || si.Mode().Perm() != 0o700 || (drop && sst.Uid != uint32(uid)) || (!drop && sst.Uid != self) {
				t.Errorf("%s: %v owner %d", sp, si.Mode(), sst.Uid)
			}
		}
	}
	// The planted links under data/ were refused, not followed: the calls
	// in those sessions failed, and nothing was made through them.
	for _, a := range []attempt{{"agent-a", "next"}, {"agent", "s"}} {
		_, res := app.call(t, a.who, map[string]any{"tool": "file_write", "session_id": a.session, "arguments": map[string]any{"path": "x.txt", "content": "x"}})
		if res["success"] == true || errCode(res) != "INTERNAL" {
			t.Errorf("%s in %s through a planted link: %v", a.who, a.session, res)
		}
	}
	if logs := app.logs.String(); !strings.Contains(logs, "make work directory") || !strings.Contains(logs, "refused") {
		t.Errorf("the refusal of a planted link is not logged for the administrator")
	}
	// A's own files are still A's.
	if _, res := app.call(t, "agent-a", map[string]any{"tool": "file_list", "session_id": "s", "arguments": map[string]any{"path": "."}}); res["success"] != true {
		t.Errorf("A lists its own directory: %v", res)
	}
}

// TestSpecialFilesNeverBlock: a FIFO or socket made in the sandbox is
// refused by the file tools at once (no waiting for a writer or reader),
// many such calls hold no queue slot, and another agent's file_write
// still runs.
func TestSpecialFilesNeverBlock(t *testing.T) {
	app := newTestApp(t)
	needSandbox(t, app)
	prog := "import os, socket\nos.mkfifo('fifo')\ns = socket.socket(socket.AF_UNIX)\ns.bind('sock')\nprint('made')"
	if _, res := app.call(t, "admin", map[string]any{"tool": "code_execute", "session_id": "s", "arguments": map[string]any{"language": "python", "code": prog}}); data(res)["stdout"] != "made\n" {
		t.Fatalf("make special files: %v", res)
	}
	done := make(chan struct{})
	timer := time.AfterFunc(30*time.Second, func() {
		select {
		case <-done:
		default:
			panic("a file tool blocked on a special file for 30 s")
		}
	})
	defer timer.Stop()
	type outcome struct {
		code int
		res  map[string]any
	}
	// 24 at once: within what one principal may have running (16) and
	// waiting (16) in the filesystem queue, so none is refused QUEUE_FULL.
	results := make(chan outcome, 24)
	for i := 0; i < 12; i++ {
		for _, req := range []map[string]any{
			{"tool": "file_read", "session_id": "s", "arguments": map[string]any{"path": "fifo"}},
			{"tool": "file_write", "session_id": "s", "arguments": map[string]any{"path": "fifo", "content": "x"}},
		} {
			go func() {
				code, res := app.call(t, "admin", req)
				results <- outcome{code, res}
			}()
		}
	}
	for i := 0; i < 24; i++ {
		o := <-results
		if o.res["success"] == true || errCode(o.res) != "PATH_NOT_ALLOWED" || !strings.Contains(fmt.Sprint(o.res), "is a FIFO") {
			t.Errorf("a file tool on a FIFO: %d %v", o.code, o.res)
		}
	}
	for tool, args := range map[string]map[string]any{"file_read": {"path": "sock"}, "file_write": {"path": "sock", "content": "x"}} {
		_, res := app.call(t, "admin", map[string]any{"tool": tool, "session_id": "s", "arguments": args})
		if errCode(res) != "PATH_NOT_ALLOWED" || !strings.Contains(fmt.Sprint(res), "socket") {
			t.Errorf("%s on a socket: %v", tool, res)
		}
	}
	// Slots were released: another principal's write runs now.
	if r := app.do(t, "admin", "PUT", fmt.Sprintf("/api/v1/principals/%d/grants", app.ids["agent"]), map[string]any{"categories": []string{"filesystem"}}); r.Status != 200 {
		t.Fatal(r.Status)
	}
	if _, res := app.call(t, "agent", map[string]any{"tool": "file_write", "arguments": map[string]any{"path": "ok.txt", "content": "x"}}); res["success"] != true {
		t.Errorf("another agent's write after the FIFO calls: %v", res)
	}
	// file_list shows them as special files, without opening them.
	_, res := app.call(t, "admin", map[string]any{"tool": "file_list", "session_id": "s", "arguments": map[string]any{"path": "."}})
	kinds := map[string]string{}
	for _, e := range data(res)["entries"].([]any) {
		m := e.(map[string]any)
		kinds[m["path"].(string)] = m["type"].(string)
	}
	if kinds["fifo"] != "special" || kinds["sock"] != "special" {
		t.Errorf("file_list kinds: %v", kinds)
	}
	close(done)
}

// TestSessionDiskQuota: a session's work directory has a disk quota. A
// program that writes past it is stopped with SANDBOX_LIMIT "disk quota"
// (one large file: "file size", a quarter of the quota), file_write
// refuses past it, the host directory stays near the quota, and freeing
// space lets the session write again.
func TestSessionDiskQuota(t *testing.T) {
	const quota = 8 << 20
	app := newTestAppWith(t, hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true}, netpolicy.Policy{},
		func(c *app.Config) { c.SessionQuotaMB = quota >> 20 })
	needSandbox(t, app)
	run := func(code string) map[string]any {
		t.Helper()
		_, res := app.call(t, "admin", map[string]any{"tool": "code_execute", "session_id": "q", "arguments": map[string]any{"language": "python", "code": code}})
		return res
	}
	usage := func() int64 {
		var n int64
		_ = filepath.WalkDir(app.workDir(t, "admin", "q"), func(p string, d fs.DirEntry, err error) error {
			if info, err := os.Lstat(p); err == nil {
				n += info.Sys().(*syscall.Stat_t).Blocks * 512
			}
			return nil
		})
		return n
	}
	msg := func(res map[string]any) string {
		e, _ := res["error"].(map[string]any)
		m, _ := e["message"].(string)
		return m
	}
	// One file past the per-file size.
	res := run("open('big', 'wb').write(b'x' * (4 << 20))")
	if errCode(res) != "SANDBOX_LIMIT" || !strings.Contains(msg(res), "file size") {
		t.Fatalf("one 4 MiB file: %v", res)
	}
	if info, err := os.Stat(filepath.Join(app.workDir(t, "admin", "q"), "big")); err != nil || info.Size() > quota/4 {
		t.Fatalf("the big file on the host: %v %v", info, err)
	}
	// Many files past the quota.
	res = run("import os\nfor i in range(64):\n    with open(f'f{i}', 'wb') as f:\n        f.write(os.urandom(1 << 20))")
	if errCode(res) != "SANDBOX_LIMIT" || !strings.Contains(msg(res), "disk quota") {
		t.Fatalf("64 MiB in files: %v", res)
	}
	// Stopped well before it wrote all (the overshoot depends on the
	// host's load; the sandbox's tests log it).
	if u := usage(); u > quota+32<<20 {
		t.Errorf("the host directory holds %d bytes, quota %d (+32 MiB slack)", u, quota)
	}
	// file_write refuses past the quota.
	_, res = app.call(t, "admin", map[string]any{"tool": "file_write", "session_id": "q", "arguments": map[string]any{"path": "more.txt", "content": strings.Repeat("y", 512<<10)}})
	if errCode(res) != "SANDBOX_LIMIT" || !strings.Contains(msg(res), "disk quota") {
		t.Fatalf("file_write past the quota: %v", res)
	}
	if _, err := os.Stat(filepath.Join(app.workDir(t, "admin", "q"), "more.txt")); err == nil {
		t.Errorf("the refused write left a file")
	}
	// Freed, the session writes again.
	if res := run("import os, glob\nfor f in glob.glob('f*') + ['big']:\n    os.remove(f)\nprint('freed')"); data(res)["stdout"] != "freed\n" {
		t.Fatalf("free: %v", res)
	}
	if _, res := app.call(t, "admin", map[string]any{"tool": "file_write", "session_id": "q", "arguments": map[string]any{"path": "more.txt", "content": "small"}}); res["success"] != true {
		t.Fatalf("file_write after freeing: %v", res)
	}
}
