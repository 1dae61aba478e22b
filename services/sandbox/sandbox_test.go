package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"toolbelt/internal/poll"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// workRoot is a directory the sandbox uid can reach (t.TempDir makes its
// directories private).
func workRoot(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	for _, p := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// backends returns each backend that works here. In CI a backend that
// does not work fails the test: the mechanism must be there.
func backends(t *testing.T) map[string]*Sandbox {
	t.Helper()
	root := workRoot(t)
	out := map[string]*Sandbox{}
	for _, name := range []string{Bubblewrap, Native} {
		s := Probe(context.Background(), name, root, quiet)
		if !s.Available() {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s sandbox unavailable in CI: %s", name, s.Status().Reason)
			}
			t.Logf("%s sandbox unavailable: %s", name, s.Status().Reason)
			continue
		}
		out[name] = s
		if s.cgroups != nil {
			// The same backend as on a host without a writable cgroup.
			r := *s
			r.cgroups = nil
			out[name+"+rlimits"] = &r
		}
	}
	if len(out) == 0 {
		t.Skip("no sandbox backend works here")
	}
	return out
}

// workDir makes a fresh work directory for one run.
func workDir(t *testing.T, s *Sandbox) string {
	t.Helper()
	root := workRoot(t)
	f, err := s.PrepareDir(root, "p1", "session")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return filepath.Join(root, "p1", "session")
}

func run(t *testing.T, s *Sandbox, timeout time.Duration, spec Spec) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := s.Run(ctx, spec)
	if err != nil {
		t.Fatalf("run %q: %v", spec.Argv, err)
	}
	return res
}

func TestFilesystemConfinement(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			dir := workDir(t, s)
			parent := filepath.Dir(dir)
			script := fmt.Sprintf(`echo hi > note.txt
echo x > /etc/tb-escape 2>/dev/null && echo ESCAPED-ETC
echo x > %[1]s/escape 2>/dev/null && echo ESCAPED-PARENT
echo x > /usr/tb-escape 2>/dev/null && echo ESCAPED-USR
cat /root/.bashrc >/dev/null 2>&1 && echo READ-ROOT
id -u`, parent)
			res := run(t, s, 20*time.Second, Spec{Argv: []string{"sh", "-c", script}, Dir: dir})
			out := string(res.Stdout)
			if res.ExitCode != 0 || strings.Contains(out, "ESCAPED") || strings.Contains(out, "READ-ROOT") {
				t.Fatalf("exit %d, stdout %q, stderr %q", res.ExitCode, out, res.Stderr)
			}
			if got, err := os.ReadFile(filepath.Join(dir, "note.txt")); err != nil || string(got) != "hi\n" {
				t.Errorf("work directory file: %q %v", got, err)
			}
			for _, p := range []string{"/etc/tb-escape", filepath.Join(parent, "escape"), "/usr/tb-escape"} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s was written outside the work directory", p)
					os.Remove(p)
				}
			}
			if os.Geteuid() == 0 && strings.TrimSpace(lastLine(out)) != fmt.Sprint(SandboxUID) {
				t.Errorf("runs as uid %q, want %d", lastLine(out), SandboxUID)
			}
			// No new namespaces inside: nothing to build an escape from.
			res = run(t, s, 20*time.Second, Spec{Argv: []string{"unshare", "--user", "--map-root-user", "true"}, Dir: dir})
			if res.ExitCode == 0 {
				t.Error("a user namespace could be created inside the sandbox")
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestMemoryLimit(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			dir := workDir(t, s)
			res := run(t, s, 60*time.Second, Spec{
				Argv: []string{"python3", "-c", "b = b'x' * (1 << 30); print(len(b))"},
				Dir:  dir, Limits: Limits{Memory: 128 << 20},
			})
			if res.ExitCode == 0 || res.Limit != LimitMemory {
				t.Fatalf("a 1 GiB allocation under 128 MiB: exit %d, limit %q, stderr %q", res.ExitCode, res.Limit, res.Stderr)
			}
		})
	}
}

func TestForkBombContained(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			dir := workDir(t, s)
			start := time.Now()
			res := run(t, s, 5*time.Second, Spec{
				Argv: []string{"sh", "-c", "f() { f & f & wait; }; f"},
				Dir:  dir, Limits: Limits{Procs: 32},
			})
			if res.Limit != LimitProcesses && res.Limit != LimitTime {
				t.Fatalf("fork bomb: exit %d, limit %q, stderr %q", res.ExitCode, res.Limit, res.Stderr)
			}
			if s.cgroups != nil && res.Limit != LimitProcesses {
				t.Errorf("with a cgroup the limit hit should be processes, got %q", res.Limit)
			}
			waitGone(t, start, func() int { return countProcs("sh", "-c", "f() { f & f & wait; }; f") })
		})
	}
}

func TestNetworkIsolation(t *testing.T) {
	port, accepted := loopbackListener(t)
	connect := fmt.Sprintf("import socket; socket.create_connection(('127.0.0.1', %d), timeout=3); print('connected')", port)
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			dir := workDir(t, s)
			before := accepted.Load()
			res := run(t, s, 20*time.Second, Spec{Argv: []string{"python3", "-c", connect}, Dir: dir})
			if res.ExitCode == 0 || accepted.Load() != before {
				t.Fatalf("reached the host without network: exit %d, stdout %q", res.ExitCode, res.Stdout)
			}
			res = run(t, s, 20*time.Second, Spec{Argv: []string{"python3", "-c", connect}, Dir: dir, Network: true})
			// The listener counts the connection on its own goroutine, which
			// may run after the program has already exited.
			if res.ExitCode == 0 {
				poll.True(t, 10*time.Second, "the host's listener counted the connection", func() bool { return accepted.Load() == before+1 })
			}
			if res.ExitCode != 0 || accepted.Load() != before+1 {
				t.Fatalf("with network: exit %d, stderr %q, connections seen %d", res.ExitCode, res.Stderr, accepted.Load()-before)
			}
		})
	}
}

func TestTimeoutKillsEscapedGrandchild(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			dir := workDir(t, s)
			start := time.Now()
			res := run(t, s, time.Second, Spec{Argv: []string{"sh", "-c", "setsid sleep 313 & (sleep 314 &) ; sleep 315"}, Dir: dir})
			if res.Limit != LimitTime {
				t.Fatalf("limit %q, exit %d", res.Limit, res.ExitCode)
			}
			for _, arg := range []string{"313", "314", "315"} {
				waitGone(t, start, func() int { return countProcs("sleep", arg) })
			}
		})
	}
}

func TestOutputCapped(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			dir := workDir(t, s)
			res := run(t, s, 20*time.Second, Spec{Argv: []string{"yes"}, Dir: dir, Limits: Limits{Output: 64 << 10}})
			mark := fmt.Sprintf(TruncationMark, 64<<10)
			if res.Limit != LimitOutput || len(res.Stdout) != 64<<10+len(mark) || !strings.HasSuffix(string(res.Stdout), mark) {
				t.Fatalf("limit %q, %d bytes of stdout", res.Limit, len(res.Stdout))
			}
		})
	}
}

func TestExitCodeAndStdin(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			dir := workDir(t, s)
			res := run(t, s, 20*time.Second, Spec{Argv: []string{"sh", "-c", "cat; echo oops >&2; exit 3"}, Dir: dir, Stdin: []byte("in")})
			if res.ExitCode != 3 || string(res.Stdout) != "in" || string(res.Stderr) != "oops\n" || res.Limit != "" {
				t.Fatalf("%+v", res)
			}
		})
	}
}

func TestNoSandboxRefuses(t *testing.T) {
	s := Probe(context.Background(), None, workRoot(t), quiet)
	if s.Available() || s.Status().Backend != None || s.Status().Reason == "" {
		t.Fatalf("status %+v", s.Status())
	}
	if _, err := s.Run(context.Background(), Spec{Argv: []string{"true"}}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("run without a sandbox: %v", err)
	}
}

// loopbackListener listens on the host's loopback, until the test ends,
// and counts the connections it accepts.
func loopbackListener(t *testing.T) (port int, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, accepted
}

// countProcs counts live processes whose command line is argv.
func countProcs(argv ...string) int {
	want := strings.Join(argv, "\x00") + "\x00"
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && string(raw) == want {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && !strings.Contains(string(st), ") Z ") {
				n++
			}
		}
	}
	return n
}

// waitGone waits (boundedly) until count is 0: the kernel reaps killed
// processes asynchronously.
func waitGone(t *testing.T, since time.Time, count func() int) {
	t.Helper()
	poll.Until(t, 30*time.Second-time.Since(since), "the sandbox's processes gone", func() (bool, string) {
		n := count()
		return n == 0, fmt.Sprintf("%d processes outlived the sandbox", n)
	})
}

// A relative work root (the default data directory is ./data) is prepared
// like an absolute one, and the walk up to / ends.
func TestPrepareDirRelative(t *testing.T) {
	base := t.TempDir()
	for _, p := range []string{filepath.Dir(base), base} { // traversable, as a data directory's parents must be
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(base)
	// As main does for the data directory when root.
	if err := os.Mkdir("data", 0o711); err != nil {
		t.Fatal(err)
	}
	s := &Sandbox{drop: true}
	done := make(chan error, 1)
	go func() {
		f, err := s.PrepareDir(filepath.Join("data", "sessions"), "p1", "s")
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		// Only root may give the directory to the sandbox user.
		if err != nil && (os.Geteuid() == 0 || !errors.Is(err, os.ErrPermission)) {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("PrepareDir with a relative root did not return")
	}
	st, err := os.Stat(filepath.Join(base, "data", "sessions", "p1", "s"))
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		return
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != SandboxUID {
		t.Errorf("the work directory belongs to uid %d, not the sandbox's %d", uid, SandboxUID)
	}
	if st, err := os.Stat(filepath.Join(base, "data", "sessions", "p1")); err != nil || st.Mode().Perm() != 0o710 || st.Sys().(*syscall.Stat_t).Gid != SandboxGID {
		t.Errorf("the way to the work directory is not traversable: %v %v", st.Mode(), err)
	}
}

// TestTmpfsCapped: /tmp and /dev/shm inside bubblewrap are memory; a
// program cannot fill the host's RAM through them past the memory limit,
// even without a cgroup to charge them to.
func TestTmpfsCapped(t *testing.T) {
	for name, s := range backends(t) {
		if !strings.HasPrefix(name, Bubblewrap) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			const limit = 32 << 20
			prog := `import sys
for d in ['/tmp', '/dev/shm']:
    n = 0
    try:
        with open(d + '/fill', 'wb') as f:
            for _ in range(96):
                f.write(b'x' * (1 << 20)); f.flush(); n += 1 << 20
    except OSError as e:
        print(d, 'refused', e.errno)
    print(d, n)
`
			res := run(t, s, 30*time.Second, Spec{Argv: []string{"python3", "-c", prog}, Dir: workDir(t, s), Limits: Limits{Memory: limit}})
			if res.Limit == LimitMemory {
				return // the cgroup charged the tmpfs and stopped it: bounded too
			}
			for _, d := range []string{"/tmp", "/dev/shm"} {
				var n int64
				for _, line := range strings.Split(string(res.Stdout), "\n") {
					if rest, ok := strings.CutPrefix(line, d+" "); ok && !strings.HasPrefix(rest, "refused") {
						fmt.Sscan(rest, &n)
					}
				}
				if n == 0 || n > limit || !strings.Contains(string(res.Stdout), d+" refused 28") {
					t.Errorf("%s took %d bytes with a %d memory limit: %s %s", d, n, limit, res.Stdout, res.Stderr)
				}
			}
		})
	}
}
