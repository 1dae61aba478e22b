// Package dbtest starts, from Go tests, the real engines a deployment of
// several instances stands on: Postgres (Debian's postgresql package) and
// Redis (redis-server). They are test infrastructure, never mocks: each
// runs as its own process in a temporary directory, as an unprivileged
// user, reached over a unix socket in that directory, and is stopped when
// the tests are done. No system service is needed or touched.
//
// A test that needs an engine is skipped when it is not installed, except
// on CI (CI=true), where it fails. .ci/run installs both. As root the
// engines run as an unprivileged user, which the tests make when it is
// missing (see account).
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
// initdb and postgres refuse to run as root. .ci/run creates it, and so
// do the tests when it is missing.
const User = "toolbelt-db"

// UserEnv names the variable that gives the engines' account another name
// than User (to try the code that makes it without touching the shared one).
const UserEnv = "TOOLBELT_TEST_DB_USER"

// engineUser is the name of the engines' account: $UserEnv, else User.
func engineUser() string {
	if u := os.Getenv(UserEnv); u != "" {
		return u
	}
	return User
}

// addUserArgs is the useradd command line that makes name, as .ci/run
// runs it: a system account with its own group, no home and no shell.
func addUserArgs(name string) []string {
	return []string{"useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", name}
}

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

// account is who the engines run as: engineUser() when the tests run as
// root, made first if missing, else the tests' own user (nil credential).
func account() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := ensureUser(engineUser(), userLockPath(), user.Lookup, runUseradd)
	if err != nil {
		return nil, err
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

// runUseradd runs useradd with args and returns what it printed on error.
func runUseradd(args []string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// userLockPath is the file whose lock serializes the test processes that
// make the engines' account: go test runs packages side by side, and two
// useradd of one name would see each other's half-written /etc/passwd or
// refuse the second.
func userLockPath() string {
	return filepath.Join(os.TempDir(), "toolbelt-dbtest-useradd.lock")
}

// ensureUser looks name up and, when it is missing, makes it with add
// (given addUserArgs(name)) holding an exclusive lock on lockPath, looking
// again first: another test process may have made it meanwhile.
func ensureUser(name, lockPath string, lookup func(string) (*user.User, error), add func(args []string) error) (*user.User, error) {
	if u, err := lookup(name); err == nil {
		return u, nil
	}
	lock, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock to make user %s: %w", name, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("lock %s to make user %s: %w", lockPath, name, err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	if u, err := lookup(name); err == nil {
		return u, nil
	}
	if err := add(addUserArgs(name)); err != nil {
		// A process that took another lock file (another TMPDIR) may
		// have made it meanwhile.
		if u, lerr := lookup(name); lerr == nil {
			return u, nil
		}
		return nil, fmt.Errorf("the tests run as root and the engines as %s, which is missing and could not be made: %w", name, err)
	}
	u, err := lookup(name)
	if err != nil {
		return nil, fmt.Errorf("user %s made, but not found: %w", name, err)
	}
	return u, nil
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
