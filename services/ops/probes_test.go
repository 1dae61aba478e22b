package ops

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"toolbelt/services/sandbox"
)

// TestAsUser: as root, a write asUser makes is refused where the user may
// not write, though root may, and the identity stays on its thread: the
// server writes there after, as before.
func TestAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root acts as another user")
	}
	private := t.TempDir() // 0700, root's
	for range 3 {
		if err := asUser(sandbox.SandboxUID, sandbox.SandboxGID, func() error { return writeProbe(private) }); !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("as uid %d in a private directory: %v", sandbox.SandboxUID, err)
		}
		if err := writeProbe(private); err != nil {
			t.Fatalf("the server after: %v", err)
		}
	}
	open := t.TempDir()
	for _, d := range []string{filepath.Dir(open), open} { // t.TempDir's are private
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := asUser(sandbox.SandboxUID, sandbox.SandboxGID, func() error { return writeProbe(open) }); err != nil {
		t.Errorf("as uid %d in an open directory: %v", sandbox.SandboxUID, err)
	}
}

// TestSessionsProbe: with no sandbox (calls run as the server), the
// sessions root is writable, made when missing, and left as it was; a
// root that is no directory is down, naming it.
func TestSessionsProbe(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "sessions")
	if c := SessionsProbe(nil, root)(ctx); c.Status != StatusOK || !strings.Contains(c.Detail, root) {
		t.Errorf("writable: %+v", c)
	}
	if entries, err := os.ReadDir(root); err != nil || len(entries) != 0 {
		t.Errorf("the probe left %v (%v)", entries, err)
	}
	if err := os.Remove(root); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if c := SessionsProbe(nil, root)(ctx); c.Status != StatusDown || !strings.Contains(c.Detail, root) {
		t.Errorf("not a directory: %+v", c)
	}
}

// TestCachedProbeIsBounded: a probe that hangs makes its component down
// when the report's deadline passes, and later reports have its result
// once it ends; one run at a time.
func TestCachedProbeIsBounded(t *testing.T) {
	release := make(chan struct{})
	runs := 0
	p := cached(func(context.Context) Component {
		runs++ // one run at a time: no race
		<-release
		return Component{Status: StatusOK, Detail: "answered"}
	})
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		if c := p.get(ctx); c.Status != StatusDown || !strings.Contains(c.Detail, "did not answer in time") {
			t.Errorf("while the probe hangs: %+v", c)
		}
		cancel()
	}
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c := p.get(ctx); c.Detail != "answered" {
		t.Errorf("once it answered: %+v", c)
	}
	if c := p.get(ctx); c.Detail != "answered" || runs != 1 {
		t.Errorf("within its interval: %+v after %d runs", c, runs)
	}
}
