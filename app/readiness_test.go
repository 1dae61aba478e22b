package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/poll"
	"toolbelt/models"
	"toolbelt/services/ops"
)

// TestReadyzFullDisk puts the data directory on a small file system and
// fills it: /readyz answers 503 naming the full disk, a write answers 507
// STORAGE_FULL naming it (not 500 "internal error"), a call of file_write
// fails STORAGE_FULL, and once space is freed the instance is ready again.
func TestReadyzFullDisk(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	mountSmallDisk(t, data, "16m")
	a := newReadinessApp(t, testConfig(t, dir))
	waitReadyz(t, a, "ready on a disk with room", func(code int, r ops.Readiness) bool {
		return code == http.StatusOK && r.Components["disk"].Status == ops.StatusOK
	})
	// The WAL emptied, the next write must grow a file on the full disk
	// (a WAL keeps its size, and SQLite writes over it in place).
	if err := a.Store.DB().Exec("PRAGMA wal_checkpoint(TRUNCATE)").Error; err != nil {
		t.Fatal(err)
	}
	filler := fill(t, data)

	r := waitReadyz(t, a, "503 naming the full disk", func(code int, r ops.Readiness) bool {
		return code == http.StatusServiceUnavailable && r.Components["disk"].Status == ops.StatusFull
	})
	if d := r.Components["disk"].Detail; !strings.Contains(d, "the data directory's disk is full") || !strings.Contains(d, data) {
		t.Errorf("disk: %q", d)
	}
	if !hasReason(r, "disk: the data directory's disk is full") {
		t.Errorf("reasons: %q", r.Reasons)
	}

	// A write: registering a tool. SQLite finds the disk full.
	code, body := adminRequest(t, a, http.MethodPost, "/api/v1/tools", map[string]any{"name": "word_count", "version": "1.0.0",
		"category": "code", "description": "Count the words of a text. Input: text. Output: the count.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}},
		"security":   map[string]any{"level": "safe"},
		"runner":     map[string]any{"kind": "http", "method": "GET", "url": "https://tools.invalid/count"}})
	apiErr, _ := body["error"].(map[string]any)
	if code != http.StatusInsufficientStorage || apiErr["code"] != models.CodeStorageFull ||
		!strings.Contains(apiErr["message"].(string), "is full") {
		t.Errorf("register a tool on a full disk: %d %v", code, body)
	}

	// A call that writes a file fails STORAGE_FULL. Its record cannot be
	// spooled on that disk either: the answer says so (NOT_RECORDED) and
	// carries the tool's own error.
	_, body = adminRequest(t, a, http.MethodPost, "/api/v1/calls", map[string]any{"tool": "file_write", "session_id": "s",
		"arguments": map[string]any{"path": "notes.txt", "content": "a line"}})
	toolErr, _ := body["error"].(map[string]any)
	if msg, _ := toolErr["message"].(string); toolErr["code"] != models.CodeStorageFull &&
		(toolErr["code"] != models.CodeNotRecorded || !strings.Contains(msg, "own error was "+models.CodeStorageFull)) {
		t.Errorf("a call on a full disk: %v", body)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitReadyz(t, a, "ready again once space is freed", func(code int, r ops.Readiness) bool { return code == http.StatusOK })
}

// TestReadyzSessionsUnwritable takes away the sandbox user's way to the
// session work directories (as root: the data directory no longer
// traversable by its group; else the sessions directory read-only for
// the server, who runs the calls): /readyz answers 503 naming them, as
// every call now fails, and 200 once the way is back.
func TestReadyzSessionsUnwritable(t *testing.T) {
	dir := t.TempDir()
	args := []string{}
	if os.Geteuid() == 0 {
		// The sandbox's uid must reach the data directory (t.TempDir makes
		// its directories private).
		for _, d := range []string{filepath.Dir(dir), dir} {
			if err := os.Chmod(d, 0o711); err != nil {
				t.Fatal(err)
			}
		}
		args = []string{"--sandbox", "auto"}
	}
	a := newReadinessApp(t, testConfig(t, dir, args...))
	data, sessions := a.Config.DataDir, filepath.Join(a.Config.DataDir, "sessions")
	r := waitReadyz(t, a, "ready with a writable sessions directory", func(code int, r ops.Readiness) bool { return code == http.StatusOK })
	if d := r.Components["sessions"].Detail; !strings.Contains(d, sessions) {
		t.Errorf("sessions: %q", d)
	}

	block, restore := sessions, os.FileMode(0o700)
	if os.Geteuid() == 0 {
		uid, _, ok := a.Runners.Sandbox().Owner()
		if !ok {
			needed(t, "a sandbox running commands as another uid: "+a.Runners.Sandbox().Status().Reason)
		}
		if !strings.Contains(r.Components["sessions"].Detail, "uid "+strconv.Itoa(uid)) {
			t.Errorf("sessions, probed as whom: %q", r.Components["sessions"].Detail)
		}
		// Root still writes everything there; the sandbox's uid no longer
		// reaches it.
		block, restore = data, 0o710
	}
	if err := os.Chmod(block, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(block, restore) })

	r = waitReadyz(t, a, "503 naming the sessions directory", func(code int, r ops.Readiness) bool {
		return code == http.StatusServiceUnavailable && r.Components["sessions"].Status == ops.StatusDown
	})
	if d := r.Components["sessions"].Detail; !strings.Contains(d, sessions) {
		t.Errorf("sessions: %q", d)
	}
	if !hasReason(r, "sessions: no call can run") {
		t.Errorf("reasons: %q", r.Reasons)
	}
	// What the report says holds: a call cannot make its work directory.
	if _, body := adminRequest(t, a, http.MethodPost, "/api/v1/calls", map[string]any{"tool": "file_list", "session_id": "s",
		"arguments": map[string]any{}}); body["success"] != false {
		t.Errorf("a call without a work directory: %v", body)
	}

	if err := os.Chmod(block, restore); err != nil {
		t.Fatal(err)
	}
	waitReadyz(t, a, "ready again with the way back", func(code int, r ops.Readiness) bool { return code == http.StatusOK })
}

// TestReadyzDatabaseDown closes the database under a running instance:
// the database is reported down, and the instance stays ready while the
// call journal can spool the calls; with the journal unusable too no call
// can be recorded, and it is not ready. On each engine.
func TestReadyzDatabaseDown(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			if engine == "postgres" {
				cfg.DatabaseURL = dbtest.Postgres(t)
			}
			a := newReadinessApp(t, cfg)
			waitReadyz(t, a, "ready", func(code int, r ops.Readiness) bool { return code == http.StatusOK })
			if err := a.Store.Close(); err != nil {
				t.Fatal(err)
			}
			r := waitReadyz(t, a, "the database down, the journal spooling the calls", func(code int, r ops.Readiness) bool {
				return r.Components["database"].Status == ops.StatusDown
			})
			if d := r.Components["database"].Detail; !r.Ready || r.Components["journal"].Status != ops.StatusOK ||
				!strings.HasPrefix(d, engine) || !strings.Contains(d, "spooled to the journal") {
				t.Errorf("readiness: %+v", r)
			}
			// The journal unusable too: a file where its directory was.
			journal := filepath.Join(a.Config.DataDir, "journal")
			if err := os.Rename(journal, journal+".away"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(journal, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			r = waitReadyz(t, a, "503 naming the database and the journal", func(code int, r ops.Readiness) bool {
				return code == http.StatusServiceUnavailable && r.Components["journal"].Status == ops.StatusDown
			})
			if !hasReason(r, "database: down, and the journal cannot take the calls") {
				t.Errorf("reasons: %q", r.Reasons)
			}
		})
	}
}

// TestReadyzRedisDown stops the Redis server a Postgres instance shares
// through: /readyz says Redis is degraded and stays 200 (the instance
// falls back to Postgres), and ok once Redis is back.
func TestReadyzRedisDown(t *testing.T) {
	rs := dbtest.RedisServer(t)
	cfg := testConfig(t, t.TempDir())
	cfg.DatabaseURL, cfg.RedisURL = dbtest.Postgres(t), rs.URL()
	a := newReadinessApp(t, cfg)
	waitReadyz(t, a, "ready with Redis", func(code int, r ops.Readiness) bool {
		return code == http.StatusOK && r.Components["redis"].Status == ops.StatusOK
	})
	rs.Stop()
	waitReadyz(t, a, "200 with Redis degraded", func(code int, r ops.Readiness) bool {
		return code == http.StatusOK && r.Ready && r.Components["redis"].Status == ops.StatusDegraded
	})
	rs.Start()
	waitReadyz(t, a, "ok with Redis back", func(code int, r ops.Readiness) bool {
		return code == http.StatusOK && r.Components["redis"].Status == ops.StatusOK
	})
}

// newReadinessApp builds the service of cfg, closed when t ends.
func newReadinessApp(t *testing.T, cfg Config) *App {
	t.Helper()
	a, err := New(context.Background(), cfg, Options{Stdout: io.Discard, LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// waitReadyz asks /readyz until its answer is what want says (the
// probes' results are kept a second), or fails t after 15 s.
func waitReadyz(t *testing.T, a *App, what string, want func(int, ops.Readiness) bool) ops.Readiness {
	t.Helper()
	var r ops.Readiness
	poll.Until(t, 15*time.Second, "/readyz "+what, func() (bool, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+a.AdminKey) // an admin sees the host paths
		a.Handler.ServeHTTP(rec, req)
		r = ops.Readiness{}
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
			t.Fatalf("/readyz: %d %s", rec.Code, rec.Body)
		}
		return want(rec.Code, r), fmt.Sprintf("last: %d %s", rec.Code, rec.Body)
	})
	return r
}

// adminRequest sends body as JSON with the admin key and decodes the
// answer.
func adminRequest(t *testing.T, a *App, method, path string, body any) (int, map[string]any) {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(method, path, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+a.AdminKey)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	a.Handler.ServeHTTP(rec, req)
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
	}
	return rec.Code, out
}

func hasReason(r ops.Readiness, prefix string) bool {
	for _, reason := range r.Reasons {
		if strings.HasPrefix(reason, prefix) {
			return true
		}
	}
	return false
}

// mountSmallDisk mounts a tmpfs of size at dir, unmounted when t ends
// (after whatever t.Cleanup registers later, the App's Close among them).
// It needs root: elsewhere it skips t, and fails it on CI.
func mountSmallDisk(t *testing.T, dir, size string) {
	t.Helper()
	if os.Geteuid() != 0 {
		needed(t, "root, to mount a small file system")
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+size+",mode=0700"); err != nil {
		needed(t, "a tmpfs mount ("+err.Error()+")")
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
			_ = unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
}

// fill writes a file in dir until its file system has no room left, and
// returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	// What a block-sized write left, in smaller writes.
	for _, err := f.Write(chunk[:512]); err == nil; _, err = f.Write(chunk[:512]) {
	}
	return path
}

// needed skips t for want of what, and fails it on CI, where everything
// a test needs is there.
func needed(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI lacks %s", what)
	}
	t.Skipf("needs %s", what)
}
