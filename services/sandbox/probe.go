package sandbox

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	var candidates []backend
	if want == Auto || want == Bubblewrap {
		path, err := exec.LookPath("bwrap")
		prlimit, err2 := exec.LookPath("prlimit")
		switch {
		case err != nil:
			reasons = append(reasons, "bubblewrap is not installed (Debian package bubblewrap)")
		case err2 != nil:
			reasons = append(reasons, "prlimit is not installed (Debian package util-linux)")
		default:
			candidates = append(candidates, bwrap{path: path, prlimit: prlimit})
		}
	}
	if want == Auto || want == Native {
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
		s.status = Status{Backend: b.name(), Limits: limits, Reason: strings.Join(reasons, "; ")}
		if drop {
			s.status.User = fmt.Sprint(SandboxUID)
		}
		log.Info("sandbox ready", "backend", s.status.Backend, "limits", limits, "user", s.status.User, "notes", s.status.Reason)
		return s
	}
	s := &Sandbox{status: Status{Backend: None, Limits: limits, Reason: strings.Join(reasons, "; ")}, log: log}
	log.Warn("no sandbox: tools that need one will refuse to run", "reason", s.status.Reason)
	return s
}

// check runs a command that writes and reads a file in a work directory.
func (s *Sandbox) check(ctx context.Context, workRoot string) error {
	dir := filepath.Join(workRoot, fmt.Sprintf(".probe-%d", time.Now().UnixNano()))
	if err := s.PrepareDir(workRoot, dir); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := s.Run(ctx, Spec{Argv: []string{"sh", "-c", "echo ok > probe && cat probe"}, Dir: dir})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "ok" {
		return fmt.Errorf("exit %d: %s", res.ExitCode, firstLine(res.Stderr))
	}
	return nil
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return line
}

// PrepareDir makes dir, under root, a work directory the sandboxed
// processes can use: when they run as another uid, dir belongs to that uid
// and the directories from root down to it can be traversed (not listed)
// by it. It fails with advice when a directory above root cannot be
// traversed.
func (s *Sandbox) PrepareDir(root, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if s == nil || !s.drop {
		return nil
	}
	// Absolute paths: the walk up below ends at the root directory (a
	// relative one would end at "." forever).
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("%s is not under %s", dir, root)
	}
	// Above root: must already be traversable by others.
	for p := filepath.Dir(root); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("uid %d cannot reach %s: %s is not traversable (chmod o+x %s, or run the server as a non-root user)", SandboxUID, root, p, p)
		}
		if parent := filepath.Dir(p); parent == p {
			break
		}
	}
	for p := root; p != dir; {
		if err := addMode(p, 0o711); err != nil {
			return err
		}
		next, _, _ := strings.Cut(strings.TrimPrefix(dir, p+string(filepath.Separator)), string(filepath.Separator))
		p = filepath.Join(p, next)
	}
	if err := os.Chown(dir, SandboxUID, SandboxGID); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

func addMode(p string, mode os.FileMode) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.Mode().Perm()&mode == mode {
		return nil
	}
	return os.Chmod(p, st.Mode().Perm()|mode)
}
