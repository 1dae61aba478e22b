// Package sandbox runs commands for tools so that they cannot hurt the
// host: bubblewrap when it is installed, else a native backend built from
// Linux namespaces, landlock and seccomp; around both, a memory and
// process cap (a cgroup where one is writable, resource limits otherwise),
// an unprivileged uid when the server runs as root, no network unless the
// tool asks for it, capped output, and a kill of the whole process tree on
// timeout.
//
// # Security notes
//
// System calls: both backends load one seccomp filter (seccomp.go). 51
// system calls on x86-64 fail with EPERM (mounts, namespaces, ptrace and
// process_vm_*, bpf, perf_event_open, io_uring, keyrings, userfaultfd,
// modules, kexec, reboot, swap, clocks…), as does clone with a namespace
// flag; clone3 fails with ENOSYS, so libc and Go fall back to clone,
// whose flags a filter can read; a call through another ABI (i386 by int
// 0x80 on x86-64, x32) fails with ENOSYS.
//
// What the sandbox sees of the host: bubblewrap's options, which name the
// work directory's host path, reach it through a pipe (--args), so its
// init's /proc/1/cmdline holds only the command; it closes the options',
// the filter's and the work directory's descriptors before the command
// starts. /proc/self/mountinfo still shows the work directory's mount
// source as a path from the root of its file system (for example
// /srv/toolbelt/data/sessions/p1/s when the data directory is on the root
// file system); no bubblewrap option hides it. Put the data directory on
// its own file system to shorten it to /sessions/p1/s.
//
// Work directories: PrepareDir makes them from the sessions root one
// element at a time, each opened from its parent without following a
// link and changed through its descriptor, and bubblewrap mounts the
// returned descriptor (Spec.DirFD) rather than resolving the path again.
//
// Disk: Limits.FileSize caps each file (RLIMIT_FSIZE). Limits.Disk is
// enforced without a file system quota: a directory already at its quota
// may not grow (so a command can still free space), each file is capped at
// what is left, and a watch measures
// the directory (DirUsage) on every change it is told of (inotify) and
// every DiskPoll, and kills the command once it holds more. The watch is
// after the fact: a run may leave the directory over its quota by what
// its processes write between two measures and the kill. The watch runs
// on a real-time thread (while a walk costs under 5 ms of CPU), waits
// only in system calls and walks without allocating, but it is still a
// goroutine: a garbage collection of the server stops it with the rest.
// Sequential writers (one file, 1024 files, 8 shell loops writing twice a
// 32 MiB quota) left at most 1.8 MiB over it on a 2-core host at load 5 to 14, also with six busy loops
// added; one earlier run under that load stalled 76 ms and left 9.5 MiB.
// A burst of single large writes is not caught in time: 8 processes each
// making one 16 MiB write() left up to 58 MiB over a 16 MiB quota, the
// bound being about Procs × the per-file cap (min(FileSize, what is
// left)) — set FileSize well below Disk where that matters.
package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults for what a sandboxed command may use.
const (
	DefaultMemory = 256 << 20
	DefaultProcs  = 64
	DefaultOutput = 1 << 20
)

// Unprivileged identity of sandboxed processes when the server is root
// (nobody:nogroup on Debian).
const (
	SandboxUID = 65534
	SandboxGID = 65534
)

// ErrUnavailable means no sandbox works on this host: a tool that needs
// one must not run.
var ErrUnavailable = errors.New("no sandbox is available on this host")

// Limits bounds one run. Zero fields take the defaults.
type Limits struct {
	Memory int64         // bytes
	Procs  int           // processes and threads
	Output int           // bytes of stdout and of stderr, each
	CPU    time.Duration // CPU time, a backstop behind the context's deadline
	// FileSize caps each file a command writes (RLIMIT_FSIZE): a write
	// past it fails (EFBIG, or SIGXFSZ kills the writer). 0: no cap but
	// what Disk leaves.
	FileSize int64
	// Disk caps the bytes the work directory holds in all (see DirUsage):
	// when it already holds as much it may not grow (a run can only free
	// space), else each file is capped to what is left, and the run is
	// killed once the directory holds more. 0: no quota.
	Disk int64
}

func (l Limits) withDefaults() Limits {
	if l.Memory <= 0 {
		l.Memory = DefaultMemory
	}
	if l.Procs <= 0 {
		l.Procs = DefaultProcs
	}
	if l.Output <= 0 {
		l.Output = DefaultOutput
	}
	return l
}

// Spec is one command to run.
type Spec struct {
	Argv []string
	// Dir is the host directory the command works in: the only writable
	// place, mounted at /work (bubblewrap) or confined by landlock (native).
	Dir string
	// DirFD, when set, is the work directory open (as PrepareDir returns
	// it): bubblewrap mounts it from the descriptor, resolving no path,
	// and the disk quota measures it through it. The caller keeps and
	// closes it. The native backend still needs Dir.
	DirFD   *os.File
	Env     []string // the whole environment; PATH defaults to the system's
	Stdin   []byte
	Network bool
	Limits  Limits
}

// Limit names what stopped a command.
type Limit string

const (
	LimitMemory    Limit = "memory"
	LimitTime      Limit = "time"
	LimitProcesses Limit = "processes"
	LimitOutput    Limit = "output"
	LimitFileSize  Limit = "file size"
	LimitDisk      Limit = "disk quota"
)

// Result is how a command ended.
type Result struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
	// Limit is set when a limit stopped the command (or, for processes,
	// refused it a fork).
	Limit    Limit
	Duration time.Duration
}

// TruncationMark ends output cut at the limit.
const TruncationMark = "\n[output truncated: the limit is %d bytes]\n"

// Status says what isolation this server has.
type Status struct {
	Backend string `json:"backend" example:"bubblewrap"` // bubblewrap, native or none
	Limits  string `json:"limits" example:"cgroup v1"`   // cgroup v1, cgroup v2 or rlimits
	User    string `json:"user,omitempty" example:"65534"`
	// Seccomp describes the system call filter of sandboxed commands.
	Seccomp string `json:"seccomp" example:"deny 51 system calls and clone with namespace flags (EPERM); clone3 and other ABIs ENOSYS"`
	Reason  string `json:"reason,omitempty"` // why no sandbox, or what is degraded
}

// Sandbox runs commands with one backend.
type Sandbox struct {
	backend backend
	cgroups *cgroups
	drop    bool // run as SandboxUID (the server is root)
	status  Status
	log     *slog.Logger
}

// backend builds the command that runs spec isolated. The command must
// wait on file descriptor 3 (closed by the runner) before running spec,
// so the runner can put it in a cgroup first.
type backend interface {
	name() string
	command(spec Spec, drop bool, limits []rlimit) (*exec.Cmd, error)
	// workPath is where the command sees the work directory.
	workPath(spec Spec) string
}

// Available reports whether commands can run.
func (s *Sandbox) Available() bool { return s != nil && s.backend != nil }

// Status reports the backend and limits in use.
func (s *Sandbox) Status() Status {
	if s == nil {
		return Status{Backend: "none", Reason: "not probed"}
	}
	return s.status
}

// Owner is the uid and gid that sandboxed processes run as when they
// differ from the server's: the work directories must belong to them.
func (s *Sandbox) Owner() (uid, gid int, ok bool) {
	if s == nil || !s.drop {
		return 0, 0, false
	}
	return SandboxUID, SandboxGID, true
}

// runUID is the real uid sandboxed processes run as.
func (s *Sandbox) runUID() int {
	if uid, _, ok := s.Owner(); ok {
		return uid
	}
	return os.Getuid()
}

// Run runs spec and waits for it. A command that fails is a Result with
// its exit code; an error means it could not run (or ctx was cancelled,
// not timed out).
func (s *Sandbox) Run(ctx context.Context, spec Spec) (*Result, error) {
	if !s.Available() {
		return nil, ErrUnavailable
	}
	if len(spec.Argv) == 0 {
		return nil, errors.New("sandbox: empty command")
	}
	spec.Limits = spec.Limits.withDefaults()
	if spec.Limits.CPU <= 0 {
		if d, ok := ctx.Deadline(); ok {
			spec.Limits.CPU = time.Until(d) + time.Second
		}
	}
	if len(spec.Env) == 0 {
		spec.Env = DefaultEnv(s.backend.workPath(spec))
	}
	// The disk quota: each file gets at most what is left, and a watch
	// measures the directory while the command runs. A directory already
	// full still runs its command, so that it can delete what the session
	// no longer needs (there is no other way to), but no file may grow
	// and the directory may not hold more than it does.
	fsize, fsizeIsDisk := spec.Limits.FileSize, false
	var watchFD = -1
	allowed := spec.Limits.Disk
	if spec.Limits.Disk > 0 {
		fd, used, err := openWork(spec)
		if err != nil {
			return nil, fmt.Errorf("sandbox: disk quota: %w", err)
		}
		if used == math.MaxInt64 {
			// Past the walk's bounds, the directory cannot be measured,
			// so no run could be held to the quota: none starts (a run
			// deleting it could not be told from one growing it past
			// what is measured).
			unix.Close(fd)
			return &Result{ExitCode: -1, Limit: LimitDisk, Stderr: fmt.Appendf(nil,
				"sandbox: the work directory holds more than %d entries or %d levels of directories, more than a session may; use another session (an administrator can remove this one's files)\n", MaxDirEntries, maxDirDepth)}, nil
		}
		if left := spec.Limits.Disk - used; left <= 0 {
			fsize, fsizeIsDisk, allowed = 1, true, used // RLIMIT_FSIZE 0 would mean none
		} else if fsize <= 0 || left < fsize {
			fsize, fsizeIsDisk = left, true
		}
		watchFD = fd
	}
	defer func() {
		if watchFD >= 0 {
			unix.Close(watchFD)
		}
	}()
	release, hold, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer hold.Close()
	// A cgroup caps memory and processes when one is writable; resource
	// limits do otherwise.
	var group *cgroup
	if s.cgroups != nil {
		if group, err = s.cgroups.create(spec.Limits); err != nil {
			s.log.Warn("sandbox cgroup", "err", err)
			group = nil
		}
	}
	busy := 0
	if group == nil {
		busy = tasksOf(s.runUID())
	}
	cmd, err := s.backend.command(spec, s.drop, rlimitsFor(spec.Limits, group == nil, fsize, busy))
	if err != nil {
		release.Close()
		group.remove()
		return nil, err
	}
	// The backend's files are the runner's to close once started.
	defer closeAll(cmd.ExtraFiles)
	cmd.ExtraFiles = append([]*os.File{release}, cmd.ExtraFiles...)
	stdout := newCapped(spec.Limits.Output)
	stderr := newCapped(spec.Limits.Output)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if spec.Stdin != nil {
		cmd.Stdin = bytes.NewReader(spec.Stdin)
	}
	// Wait returns even if an escaped process keeps the pipes open.
	cmd.WaitDelay = time.Second
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	start := time.Now()
	if err := startOnOwnThread(cmd); err != nil {
		release.Close()
		group.remove()
		return nil, fmt.Errorf("sandbox: start %s: %w", s.backend.name(), err)
	}
	release.Close()
	// The command waits on fd 3 until it is in its cgroup.
	if group != nil {
		if err := group.add(cmd.Process.Pid); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			group.kill()
			group.remove()
			return nil, fmt.Errorf("sandbox: confine: %w", err)
		}
	}
	hold.Close()

	var diskOver <-chan struct{}
	var watch *diskWatch
	// exited is set once the first process has exited, before it is
	// reaped: until then its pid is its own.
	var reaping sync.Mutex
	exited := false
	if watchFD >= 0 {
		// The run's processes, for the space their open, deleted files
		// hold (nil once the first one has exited: its pid may be reused).
		pids := func() []int {
			reaping.Lock()
			defer reaping.Unlock()
			if exited {
				return nil
			}
			return tree(cmd.Process.Pid)
		}
		watch, err = startDiskWatch(watchFD, allowed, pids, func() {
			// Every process at once, not the first one alone: its death
			// reaches the others (die-with-parent, the end of the pid
			// namespace) only when it is scheduled, and they write on
			// meanwhile.
			group.kill()
			reaping.Lock()
			defer reaping.Unlock()
			if !exited { // else its pid may be another process's by now
				for _, pid := range tree(cmd.Process.Pid) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		})
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			group.kill()
			group.remove()
			return nil, fmt.Errorf("sandbox: disk watch: %w", err)
		}
		diskOver = watch.over
	}
	done := make(chan error, 1)
	go func() {
		var info unix.Siginfo
		for unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
		}
		reaping.Lock()
		exited = true
		reaping.Unlock()
		done <- cmd.Wait()
	}()
	var waitErr error
	var limit Limit
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		limit = LimitTime
	case <-stdout.full:
		limit = LimitOutput
	case <-stderr.full:
		limit = LimitOutput
	case <-diskOver:
		limit = LimitDisk
	}
	if limit != "" {
		// Killing the first process ends its pid namespace, and with it
		// every process inside, setsid or not; the cgroup catches the rest.
		_ = cmd.Process.Kill()
		group.kill()
		waitErr = <-done
	}
	if watch != nil && limit == "" {
		// The watch kills on its own thread: the command may have ended
		// by its kill before this select saw it.
		select {
		case <-watch.over:
			limit = LimitDisk
		default:
		}
	}
	res := &Result{ExitCode: exitCode(cmd, waitErr), Stdout: stdout.bytes(), Stderr: stderr.bytes(), Duration: time.Since(start), Limit: limit}
	switch {
	case group != nil && group.oomKilled():
		res.Limit = LimitMemory
	case group != nil && group.pidsRefused() && res.Limit != LimitOutput:
		res.Limit = LimitProcesses
	case res.Limit == "" && group == nil && memoryExhausted(res):
		res.Limit = LimitMemory
	case (res.Limit == "" || res.Limit == LimitTime) && group == nil && forkRefused(res):
		res.Limit = LimitProcesses
	case res.Limit == "" && fsize > 0 && fileTooLarge(res):
		res.Limit = LimitFileSize
		if fsizeIsDisk {
			res.Limit = LimitDisk
		}
	}
	group.kill()
	group.remove()
	if watch != nil {
		watch.end()
		// What the last writes left, measured once every process is gone.
		if used, err := dirUsageFD(watch.fd, nil); (err != nil || used > allowed) && (res.Limit == "" || res.Limit == LimitFileSize) {
			res.Limit = LimitDisk
		}
	}
	if limit == LimitTime && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return res, ctx.Err()
	}
	return res, nil
}

// DefaultEnv is the environment of a command that sets none; work is the
// work directory as the command sees it.
func DefaultEnv(work string) []string {
	return []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + work, "TMPDIR=" + work, "LANG=C.UTF-8"}
}

func exitCode(cmd *exec.Cmd, err error) int {
	if cmd.ProcessState != nil {
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return cmd.ProcessState.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// memoryExhausted guesses a memory limit from a failed command's output
// when resource limits (not a cgroup) enforce it: the allocation fails
// inside the program, which says so.
func memoryExhausted(res *Result) bool {
	if res.ExitCode == 0 {
		return false
	}
	out := string(res.Stderr)
	for _, s := range []string{"MemoryError", "Cannot allocate memory", "out of memory", "JavaScript heap out of memory", "std::bad_alloc"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// fileTooLarge tells from the exit status or the output that
// RLIMIT_FSIZE refused a write: SIGXFSZ killed the writer (the shell
// reports it, or it was the command), or the program, ignoring the signal
// as Python does, reported EFBIG.
func fileTooLarge(res *Result) bool {
	if res.ExitCode == 128+int(syscall.SIGXFSZ) {
		return true
	}
	out := string(res.Stderr)
	return strings.Contains(out, "File too large") || strings.Contains(out, "File size limit exceeded")
}

// openWork opens the work directory (following no link at its last
// element) and measures it.
func openWork(spec Spec) (fd int, used int64, err error) {
	if spec.DirFD != nil {
		fd, err = unix.FcntlInt(spec.DirFD.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	} else {
		fd, err = unix.Open(spec.Dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return -1, 0, err
	}
	if used, err = dirUsageFD(fd, nil); errors.Is(err, ErrTooManyEntries) {
		return fd, math.MaxInt64, nil
	} else if err != nil {
		unix.Close(fd)
		return -1, 0, err
	}
	return fd, used, nil
}

// forkRefused tells from the output that RLIMIT_NPROC refused a fork
// (without a cgroup there is no counter to read).
func forkRefused(res *Result) bool {
	out := string(res.Stderr)
	eagain := strings.Contains(out, "Resource temporarily unavailable")
	return strings.Contains(out, "fork") && (eagain || strings.Contains(out, "Cannot fork")) ||
		// bubblewrap's own clone, refused when the uid's processes (all
		// sandboxed commands together, without a cgroup) are at the cap
		strings.HasPrefix(out, "bwrap: ") && eagain
}

// capped keeps the first n bytes written and signals once more arrives.
type capped struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	n    int
	over bool
	full chan struct{}
}

func newCapped(n int) *capped { return &capped{n: n, full: make(chan struct{})} }

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.n - c.buf.Len()
	if len(p) <= room {
		c.buf.Write(p)
		return len(p), nil
	}
	c.buf.Write(p[:max(room, 0)])
	if !c.over {
		c.over = true
		close(c.full)
	}
	return len(p), nil
}

func (c *capped) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := bytes.Clone(c.buf.Bytes())
	if c.over {
		out = append(out, fmt.Sprintf(TruncationMark, c.n)...)
	}
	return out
}

var _ io.Writer = (*capped)(nil)

// startOnOwnThread starts cmd from a goroutine locked to its OS thread
// until the command's first process has exited. The kernel sends the
// parent-death signal (Pdeathsig, SIGKILL here) when the thread that
// started the process ends, not the server: a goroutine that locks its
// thread and returns (the disk watch does) ends its thread, and a command
// started from that thread before was killed with it (exit code 137) by
// another command's end.
func startOnOwnThread(cmd *exec.Cmd) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		// Until it exits, without reaping it (Wait does, elsewhere); an
		// error other than EINTR means it is gone already.
		var info unix.Siginfo
		for unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
		}
	}()
	return <-started
}
