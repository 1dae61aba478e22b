// Package dbtest starts, from Go tests, the real engines a deployment of
// several instances stands on: Postgres (Debian's postgresql package) and
// Redis (redis-server). They are test infrastructure, never mocks: each
// runs as its own process in a temporary directory, as an unprivileged
// user, reached over a unix socket in that directory, and is stopped when
// the tests are done. No system service is needed or touched.
//
// A test that needs an engine is skipped when it is not installed (or,
// as root, when the user it runs as is missing), except on CI (CI=true),
// where it fails. .ci/run installs both and makes the user.
package dbtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// User is the account the engines run as when the tests run as root:
// initdb and postgres refuse to run as root. .ci/run creates it.
const User = "toolbelt-db"

// addUser is the command that makes User, for the skip message.
const addUser = "useradd --system --user-group --no-create-home --shell /usr/sbin/nologin " + User

// BackendEnv names the variable choosing the database of tests that run
// on one backend (modelstest.Store, the web suite): "postgres", or SQLite
// when unset or "sqlite".
const BackendEnv = "TOOLBELT_TEST_DATABASE"

// Backend is the database chosen by BackendEnv: "sqlite" or "postgres".
// Any other value fails t.
func Backend(t testing.TB) string {
	t.Helper()
	switch v := os.Getenv(BackendEnv); v {
	case "", "sqlite":
		return "sqlite"
	case "postgres":
		return "postgres"
	default:
		t.Fatalf("%s=%q: use sqlite or postgres", BackendEnv, v)
		return ""
	}
}

// unavailable skips t, or fails it on CI, because an engine is missing.
func unavailable(t testing.TB, engine string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is needed on CI: %v", engine, err)
	}
	t.Skipf("%s unavailable (.ci/run installs it): %v", engine, err)
}

// account is who the engines run as: User when the tests run as root,
// else the tests' own user (nil credential).
func account() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(User)
	if err != nil {
		return nil, fmt.Errorf("the tests run as root and the engines as %s, which is missing (make it: %s)", User, addUser)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: false, Groups: []uint32{}}, nil
}

// workDir makes a private temporary directory owned by cred's user, named
// after the engine, and records the process that owns it, so a later run
// can remove what a killed one left (see sweep).
func workDir(engine string, cred *syscall.Credential) (string, error) {
	sweep(engine)
	dir, err := os.MkdirTemp("", "toolbelt-"+engine+"-")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return "", err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			_ = os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// sweep removes the directories of engine whose test process is gone (it
// was killed before it could clean up; its engines died with it, see
// start).
func sweep(engine string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "toolbelt-"+engine+"-*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "owner"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
}

// process is an engine's server process.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when it exited
	err  error         // its exit, once done
}

// start runs cmd as cred's user. The kernel kills it (deathSig) when the
// test process dies, even by SIGKILL, so no engine outlives its tests: the
// signal is tied to the thread that started it, so that thread is locked
// to a goroutine that lives as long as the process.
func start(cmd *exec.Cmd, cred *syscall.Credential, deathSig syscall.Signal) (*process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: deathSig, Setpgid: true}
	p := &process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine, after the process
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// stop signals the process and waits up to timeout for it to exit, then
// kills it.
func (p *process) stop(sig syscall.Signal, timeout time.Duration) {
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// logTail is the end of an engine's log file, for an error message.
func logTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}
