package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Backend names for Probe.
const (
	Auto       = "auto"
	Bubblewrap = "bubblewrap"
	Native     = "native"
	None       = "none"
)

// Probe finds the best sandbox that works here by running a command in
// each candidate: bubblewrap when installed, then the native backend.
// want names one backend ("auto" tries both, "none" disables sandboxing).
// workRoot is the directory under which work directories live. The
// result is never nil; Available reports whether anything works, and
// Status says what and why.
func Probe(ctx context.Context, want, workRoot string, log *slog.Logger) *Sandbox {
	if want == "" {
		want = Auto
	}
	drop := os.Geteuid() == 0
	// No core dumps, for the server (its memory holds secrets) and for
	// every command it starts.
	if err := setOwnRlimits([]rlimit{{Resource: unix.RLIMIT_CORE}}); err != nil {
		log.Warn("disable core dumps", "err", err)
	}
	cg, cgWhy := detectCgroups()
	limits := "rlimits"
	if cg != nil {
		limits = fmt.Sprintf("cgroup v%d", cg.version)
	}
	var reasons []string
	if cgWhy != "" {
		reasons = append(reasons, cgWhy)
	}
	filter, err := buildSeccomp()
	if err != nil {
		reasons = append(reasons, fmt.Sprintf("no seccomp filter for %s: %v", runtime.GOARCH, err))
	}
	var candidates []backend
	switch {
	case filter == nil:
		// Neither backend runs a command without its filter.
	case want == Auto || want == Bubblewrap:
		path, err := exec.LookPath("bwrap")
		prlimit, err2 := exec.LookPath("prlimit")
		switch {
		case err != nil:
			reasons = append(reasons, "bubblewrap is not installed (Debian package bubblewrap)")
		case err2 != nil:
			reasons = append(reasons, "prlimit is not installed (Debian package util-linux)")
		default:
			candidates = append(candidates, bwrap{path: path, prlimit: prlimit, filter: filter})
		}
	}
	if filter != nil && (want == Auto || want == Native) {
		candidates = append(candidates, native{})
	}
	if want == None {
		reasons = append(reasons, "sandboxing is disabled by configuration")
	}
	for _, b := range candidates {
		s := &Sandbox{backend: b, cgroups: cg, drop: drop, log: log}
		if err := s.check(ctx, workRoot); err != nil {
			reasons = append(reasons, fmt.Sprintf("%s does not work here: %v", b.name(), err))
			continue
		}
		s.status = Status{Backend: b.name(), Limits: limits, Seccomp: filter.summary, Reason: strings.Join(reasons, "; ")}
		if drop {
			s.status.User = fmt.Sprint(SandboxUID)
		}
		log.Info("sandbox ready", "backend", s.status.Backend, "limits", limits, "user", s.status.User, "seccomp", s.status.Seccomp, "notes", s.status.Reason)
		return s
	}
	s := &Sandbox{status: Status{Backend: None, Limits: limits, Reason: strings.Join(reasons, "; ")}, log: log}
	log.Warn("no sandbox: tools that need one will refuse to run", "reason", s.status.Reason)
	return s
}

// check runs a command that writes and reads a file in a work directory.
func (s *Sandbox) check(ctx context.Context, workRoot string) error {
	name := fmt.Sprintf(".probe-%d", time.Now().UnixNano())
	f, err := s.PrepareDir(workRoot, name)
	if err != nil {
		return err
	}
	defer os.RemoveAll(filepath.Join(workRoot, name))
	defer f.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := s.Run(ctx, Spec{Argv: []string{"sh", "-c", "echo ok > probe && cat probe"}, Dir: f.Name(), DirFD: f})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "ok" {
		return fmt.Errorf("exit %d: %s", res.ExitCode, firstLine(res.Stderr))
	}
	return nil
}

// reachable checks that the sandbox's uid can traverse every directory
// above root: by others' x bit, or by its group's (ShareWithSandbox).
func reachable(root string) error {
	// Absolute: the walk up ends at / (a relative one would end at "."
	// forever).
	abs, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		perm, gid := st.Mode().Perm(), st.Sys().(*syscall.Stat_t).Gid
		if perm&0o001 == 0 && (gid != SandboxGID || perm&0o010 == 0) {
			return fmt.Errorf("uid %d cannot reach %s: %s is not traversable (chmod o+x %s, or run the server as a non-root user)", SandboxUID, root, p, p)
		}
		if parent := filepath.Dir(p); parent == p {
			return nil
		}
	}
}

// ShareWithSandbox makes dir (the data directory) traversable by the
// sandbox's group and by nobody else (root:65534, 0710) when the server
// is root and sandboxed commands run as uid 65534, which must reach the
// work directories below it; otherwise it makes dir the server's alone
// (0700).
func ShareWithSandbox(dir string) error {
	if os.Geteuid() != 0 {
		return os.Chmod(dir, 0o700)
	}
	if err := os.Chown(dir, 0, SandboxGID); err != nil {
		return err
	}
	return os.Chmod(dir, 0o710)
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return line
}

// PrepareDir makes root/elems[0]/elems[1]/… a work directory the
// sandboxed processes can use, and returns it open. Each element is one
// path element (no separator, not "." or "..", no NUL). It follows no
// link: from root (opened without following a link at its last element)
// each directory is made and opened relative to its parent with
// O_NOFOLLOW, checked to be a directory (those above the last owned by
// the server), and changed through its descriptor, never by path.
//
// When the sandboxed processes run as another uid, the last directory
// belongs to that uid (mode 0700), and the ones from root down to it can
// be traversed by it: that uid must reach the work directory by its path
// (bubblewrap resolves even a descriptor's path, with realpath of
// /proc/self/fd/N, and native commands are given the path). They belong
// to the server and the sandbox's group, 0710: traversable by that group
// only, listed and written by the server alone. PrepareDir fails with
// advice when a directory above root cannot be traversed (see
// ShareWithSandbox). root itself is made when missing.
func (s *Sandbox) PrepareDir(root string, elems ...string) (*os.File, error) {
	if len(elems) == 0 {
		return nil, errors.New("sandbox: PrepareDir needs a directory below root")
	}
	for _, e := range elems {
		if e == "" || e == "." || e == ".." || strings.ContainsAny(e, "/\x00") {
			return nil, fmt.Errorf("sandbox: %q is not one path element", e)
		}
	}
	drop := s != nil && s.drop
	if drop {
		if err := reachable(root); err != nil {
			return nil, err
		}
	}
	// root is the server's configuration: its own path is trusted.
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	path := root
	uid := os.Geteuid()
	for i, e := range append([]string{""}, elems...) {
		if i > 0 {
			path = filepath.Join(path, e)
			if err := unix.Mkdirat(fd, e, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return nil, &os.PathError{Op: "mkdir", Path: path, Err: err}
			}
			next, err := unix.Openat(fd, e, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			unix.Close(fd)
			if err != nil {
				if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
					err = fmt.Errorf("%w (a link or not a directory: refused)", err)
				}
				return nil, &os.PathError{Op: "open", Path: path, Err: err}
			}
			fd = next
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, &os.PathError{Op: "stat", Path: path, Err: err}
		}
		last := i == len(elems)
		owner := int(st.Uid)
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			err = errors.New("not a directory")
		case i > 0 && !last && owner != uid:
			err = fmt.Errorf("owned by uid %d, not the server's %d", owner, uid)
		case last && owner != uid && !(drop && owner == SandboxUID):
			err = fmt.Errorf("owned by uid %d", owner)
		}
		if err == nil && drop {
			if last {
				if err = unix.Fchown(fd, SandboxUID, SandboxGID); err == nil {
					err = unix.Fchmod(fd, 0o700)
				}
			} else if st.Gid != SandboxGID {
				if err = unix.Fchown(fd, uid, SandboxGID); err == nil {
					err = unix.Fchmod(fd, 0o710)
				}
			} else if st.Mode&0o7777 != 0o710 {
				err = unix.Fchmod(fd, 0o710)
			}
		}
		if err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("sandbox: work directory %s: %w", path, err)
		}
	}
	return os.NewFile(uintptr(fd), path), nil
}
