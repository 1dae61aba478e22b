// Package sandbox runs commands for tools so that they cannot hurt the
// host: bubblewrap when it is installed, else a native backend built from
// Linux namespaces, landlock and seccomp; around both, a memory and
// process cap (a cgroup where one is writable, resource limits otherwise),
// an unprivileged uid when the server runs as root, no network unless the
// tool asks for it (or, under bubblewrap, only an HTTP proxy of the
// server's: Spec.Proxy, egress.go), capped output, and a kill of the whole process tree on
// timeout. Run runs a command to its end; Start runs one that stays (a
// stdio MCP server) with live pipes.
//
// # Security notes
//
// System calls: both backends load one seccomp filter (seccomp.go). 51
// system calls on x86-64 fail with EPERM (mounts, namespaces, ptrace and
// process_vm_*, bpf, perf_event_open, io_uring, keyrings, userfaultfd,
// modules, kexec, reboot, swap, clocks…), as does clone with a namespace
// flag; socket and socketpair of any family but unix, inet and inet6
// fail with EAFNOSUPPORT (vsock, which no network namespace isolates,
// netlink, packet, alg, key and the rest); clone3 fails with ENOSYS, so
// libc and Go fall back to clone, whose flags a filter can read; a call
// through another ABI (i386 by int 0x80 on x86-64, x32) fails with
// ENOSYS.
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
//
// Long-running processes: Start confines its command exactly as Run
// does (the same backend command, seccomp filter, uid, cgroup or
// resource limits, work directory mount, network and environment: only
// Spec.Env or DefaultEnv, and PWD, which bubblewrap sets), but for as
// long as it lives: its stdin and stdout are pipes to the caller, its
// stderr is read all along and only its last StderrTail bytes kept (a
// command writing without pause blocks on nothing but an unread stdout),
// and the disk quota's watch, with its thread, lasts as long as the
// process. The context sets no CPU time limit, since a server has no
// deadline: Limits.CPU, when set, caps each process's CPU time over its
// whole life. Stop, Kill and the end of the context kill every process
// of the tree (the cgroup's, and those a walk of /proc finds) and wait
// for each one to exit; Stop first closes stdin, then sends SIGTERM to
// the command's processes (not to bubblewrap's), as MCP asks. What such
// a process holds outlives each request it serves: its memory, its work
// directory's files and whatever it read stay there for the next one,
// whoever sends it — a process shared by sessions shares them too.
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
	"path/filepath"
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
	Memory int64 // bytes
	Procs  int   // processes and threads
	Output int   // bytes of stdout and of stderr, each (Run's)
	// CPU caps the CPU time of each process: for Run, without a cgroup,
	// a backstop behind the context's deadline (which sets it when
	// zero); for Start, over the process's whole life (none when zero).
	CPU time.Duration
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
	DirFD *os.File
	Env   []string // the whole environment; PATH defaults to the system's
	Stdin []byte   // Run's input (Start gives a pipe instead)
	// Network shares the host's network. Without it a command has a
	// network namespace of its own, with only loopback up.
	Network bool
	// Proxy, when set, is the host path of a unix socket where an HTTP
	// proxy listens (bubblewrap only, without Network): the command
	// reaches it at 127.0.0.1:<port>, named by HTTP_PROXY, HTTPS_PROXY,
	// http_proxy and https_proxy, and nothing else outside (see
	// egress.go).
	Proxy  string
	Limits Limits
	// Mounts are host directories the command may read, each at a path
	// of its own under /opt (bubblewrap only): the code of a server that
	// is not under /usr.
	Mounts []Mount
}

// Mount is a host directory shown read-only at At, a directory below
// /opt.
type Mount struct {
	Host, At string
}

// checkMounts refuses a mount that is not an absolute host directory
// shown at one new directory below /opt, where nothing else is mounted.
func checkMounts(ms []Mount) error {
	seen := map[string]bool{}
	for _, m := range ms {
		name, ok := strings.CutPrefix(m.At, "/opt/")
		if !ok || name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || seen[name] {
			return fmt.Errorf("sandbox: a mount is shown at /opt/<name>, one new directory (not %q)", m.At)
		}
		seen[name] = true
		if !filepath.IsAbs(m.Host) || filepath.Clean(m.Host) != m.Host || strings.ContainsRune(m.Host, 0) {
			return fmt.Errorf("sandbox: mount %q: the host directory must be an absolute, clean path", m.Host)
		}
		if st, err := os.Stat(m.Host); err != nil || !st.IsDir() {
			return fmt.Errorf("sandbox: mount %q: not a directory on this host", m.Host)
		}
	}
	return nil
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
	Seccomp string `json:"seccomp" example:"deny 51 system calls and clone with namespace flags (EPERM); sockets but unix, inet and inet6 (EAFNOSUPPORT); clone3 and other ABIs ENOSYS"`
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
	// wrappers is how many processes at the top of a command's tree are
	// the backend's own rather than the command's.
	wrappers() int
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
	if err := s.usable(spec); err != nil {
		return nil, err
	}
	if spec.Limits.CPU <= 0 {
		if d, ok := ctx.Deadline(); ok {
			spec.Limits.CPU = time.Until(d) + time.Second
		}
	}
	stdout := newCapped(spec.Limits.withDefaults().Output)
	stderr := newCapped(spec.Limits.withDefaults().Output)
	p, err := s.launch(spec, false, func(cmd *exec.Cmd) {
		cmd.Stdout, cmd.Stderr = stdout, stderr
		if spec.Stdin != nil {
			cmd.Stdin = bytes.NewReader(spec.Stdin)
		}
	})
	if errors.Is(err, ErrTooManyEntries) {
		return &Result{ExitCode: -1, Limit: LimitDisk, Stderr: fmt.Appendf(nil,
			"sandbox: the work directory holds more than %d entries or %d levels of directories, more than a session may; use another session (an administrator can remove this one's files)\n", MaxDirEntries, maxDirDepth)}, nil
	}
	if err != nil {
		return nil, err
	}
	var diskOver <-chan struct{}
	if p.watch != nil {
		diskOver = p.watch.over
	}
	var waitErr error
	var limit Limit
	select {
	case waitErr = <-p.done:
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
		_ = p.cmd.Process.Kill()
		p.group.kill()
		waitErr = <-p.done
	}
	res := &Result{ExitCode: exitCode(p.cmd, waitErr), Stdout: stdout.bytes(), Stderr: stderr.bytes(), Duration: time.Since(p.start), Limit: limit}
	p.finish(res)
	if limit == LimitTime && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return res, ctx.Err()
	}
	return res, nil
}

// usable checks that spec can run here.
func (s *Sandbox) usable(spec Spec) error {
	if !s.Available() {
		return ErrUnavailable
	}
	if len(spec.Argv) == 0 {
		return errors.New("sandbox: empty command")
	}
	if len(spec.Mounts) > 0 && s.backend.name() != "bubblewrap" {
		return errors.New("sandbox: read-only mounts need bubblewrap")
	}
	if err := checkProxy(spec, s.backend.name()); err != nil {
		return err
	}
	return checkMounts(spec.Mounts)
}

// launched is a started command and what confines it: what Run and Start
// share.
type launched struct {
	cmd   *exec.Cmd
	group *cgroup    // nil with resource limits
	watch *diskWatch // nil without Limits.Disk
	// watchFD is the work directory the disk watch measures (-1: none).
	watchFD int
	// allowed is what the work directory may hold; fsize the cap of each
	// file, which is the disk quota's when fsizeIsDisk.
	allowed     int64
	fsize       int64
	fsizeIsDisk bool
	// wrappers is how many processes at the top of the tree are the
	// backend's own (see backend.wrappers).
	wrappers int
	start    time.Time
	// exited is set once the first process has exited, before it is
	// reaped: until then its pid is its own.
	reaping sync.Mutex
	exited  bool
	done    chan error // cmd.Wait's error, once
}

// launch starts spec isolated: the backend's command, in its own cgroup or
// under resource limits, with a watch on the work directory under a disk
// quota. stdio connects the command's standard streams. cpuAlways sets
// Limits.CPU as a resource limit also where a cgroup caps the rest (Run
// has its deadline's kill instead). An unmeasurable work directory under
// a quota is ErrTooManyEntries: no command starts there.
func (s *Sandbox) launch(spec Spec, cpuAlways bool, stdio func(*exec.Cmd)) (_ *launched, err error) {
	spec.Limits = spec.Limits.withDefaults()
	if len(spec.Env) == 0 {
		spec.Env = DefaultEnv(s.backend.workPath(spec))
	}
	p := &launched{watchFD: -1, fsize: spec.Limits.FileSize, allowed: spec.Limits.Disk, wrappers: s.backend.wrappers(), done: make(chan error, 1)}
	defer func() {
		if err != nil && p.watchFD >= 0 {
			unix.Close(p.watchFD)
		}
	}()
	// The disk quota: each file gets at most what is left, and a watch
	// measures the directory while the command runs. A directory already
	// full still runs its command, so that it can delete what the session
	// no longer needs (there is no other way to), but no file may grow
	// and the directory may not hold more than it does.
	if spec.Limits.Disk > 0 {
		fd, used, err := openWork(spec)
		if err != nil {
			return nil, fmt.Errorf("sandbox: disk quota: %w", err)
		}
		p.watchFD = fd
		if used == math.MaxInt64 {
			// Past the walk's bounds, the directory cannot be measured,
			// so no run could be held to the quota: none starts (a run
			// deleting it could not be told from one growing it past
			// what is measured).
			return nil, fmt.Errorf("sandbox: work directory: %w", ErrTooManyEntries)
		}
		if left := spec.Limits.Disk - used; left <= 0 {
			p.fsize, p.fsizeIsDisk, p.allowed = 1, true, used // RLIMIT_FSIZE 0 would mean none
		} else if p.fsize <= 0 || left < p.fsize {
			p.fsize, p.fsizeIsDisk = left, true
		}
	}
	release, hold, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer hold.Close()
	// A cgroup caps memory and processes when one is writable; resource
	// limits do otherwise.
	if s.cgroups != nil {
		if p.group, err = s.cgroups.create(spec.Limits); err != nil {
			s.log.Warn("sandbox cgroup", "err", err)
			p.group = nil
		}
	}
	busy := 0
	if p.group == nil {
		busy = tasksOf(s.runUID())
	}
	limits := rlimitsFor(spec.Limits, p.group == nil, p.fsize, busy)
	if cpuAlways && p.group != nil && spec.Limits.CPU > 0 {
		limits = append(limits, cpuRlimit(spec.Limits.CPU))
	}
	cmd, err := s.backend.command(spec, s.drop, limits)
	if err != nil {
		release.Close()
		p.group.remove()
		return nil, err
	}
	p.cmd = cmd
	// The backend's files are the runner's to close once started.
	defer closeAll(cmd.ExtraFiles)
	cmd.ExtraFiles = append([]*os.File{release}, cmd.ExtraFiles...)
	stdio(cmd)
	// Wait returns even if an escaped process keeps the pipes open.
	cmd.WaitDelay = time.Second
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	p.start = time.Now()
	exited, err := startOnOwnThread(cmd)
	if err != nil {
		release.Close()
		p.group.remove()
		return nil, fmt.Errorf("sandbox: start %s: %w", s.backend.name(), err)
	}
	release.Close()
	// The command waits on fd 3 until it is in its cgroup.
	if p.group != nil {
		if err := p.group.add(cmd.Process.Pid); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			p.group.kill()
			p.group.remove()
			return nil, fmt.Errorf("sandbox: confine: %w", err)
		}
	}
	hold.Close()

	if p.watchFD >= 0 {
		// The run's processes, for the space their open, deleted files
		// hold (nil once the first one has exited: its pid may be reused).
		pids := func() []int {
			p.reaping.Lock()
			defer p.reaping.Unlock()
			if p.exited {
				return nil
			}
			return tree(cmd.Process.Pid)
		}
		p.watch, err = startDiskWatch(p.watchFD, p.allowed, pids, p.killAll)
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			p.group.kill()
			p.group.remove()
			return nil, fmt.Errorf("sandbox: disk watch: %w", err)
		}
	}
	go func() {
		<-exited
		p.reaping.Lock()
		p.exited = true
		p.reaping.Unlock()
		p.done <- cmd.Wait()
	}()
	return p, nil
}

// killAll kills every process of the command at once, not the first one
// alone: its death reaches the others (die-with-parent, the end of the
// pid namespace) only when it is scheduled, and they run on meanwhile.
func (p *launched) killAll() {
	p.group.kill()
	p.signal(syscall.SIGKILL, 0)
}

// signal sends sig to the command's processes but the first skip of
// them, while the first one has not exited (else its pid may be another
// process's by now).
func (p *launched) signal(sig syscall.Signal, skip int) {
	p.reaping.Lock()
	defer p.reaping.Unlock()
	if p.exited {
		return
	}
	pids := tree(p.cmd.Process.Pid)
	for _, pid := range pids[min(skip, len(pids)):] {
		_ = syscall.Kill(pid, sig)
	}
}

// pidfds opens the command's processes (while the first one has not
// exited), so that their end can be waited for (waitPidfds) whoever reaps
// them.
func (p *launched) pidfds() []int {
	p.reaping.Lock()
	defer p.reaping.Unlock()
	if p.exited {
		return nil
	}
	var fds []int
	for _, pid := range tree(p.cmd.Process.Pid) {
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			fds = append(fds, fd)
		}
	}
	return fds
}

// waitPidfds waits, at most until deadline, for the processes of fds to
// exit, and closes fds.
func waitPidfds(fds []int, deadline time.Time) {
	for _, fd := range fds {
		for {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if n, err := unix.Poll(pfd, int(left/time.Millisecond)+1); n > 0 || err != unix.EINTR {
				break
			}
		}
		unix.Close(fd)
	}
}

// finish completes res, the end of the command (its first process has
// been waited for), with the limit that stopped it, and releases the
// cgroup and the disk watch.
func (p *launched) finish(res *Result) {
	if p.watch != nil && res.Limit == "" {
		// The watch kills on its own thread: the command may have ended
		// by its kill before the caller saw it.
		select {
		case <-p.watch.over:
			res.Limit = LimitDisk
		default:
		}
	}
	group := p.group
	switch {
	case group != nil && group.oomKilled():
		res.Limit = LimitMemory
	case group != nil && group.pidsRefused() && res.Limit != LimitOutput:
		res.Limit = LimitProcesses
	case res.Limit == "" && group == nil && memoryExhausted(res):
		res.Limit = LimitMemory
	case (res.Limit == "" || res.Limit == LimitTime) && group == nil && forkRefused(res):
		res.Limit = LimitProcesses
	case res.Limit == "" && p.fsize > 0 && fileTooLarge(res):
		res.Limit = LimitFileSize
		if p.fsizeIsDisk {
			res.Limit = LimitDisk
		}
	}
	group.kill()
	group.remove()
	if p.watch != nil {
		p.watch.end()
		// What the last writes left, measured once every process is gone.
		if used, err := dirUsageFD(p.watch.fd, nil); (err != nil || used > p.allowed) && (res.Limit == "" || res.Limit == LimitFileSize) {
			res.Limit = LimitDisk
		}
	}
	if p.watchFD >= 0 {
		unix.Close(p.watchFD)
		p.watchFD = -1
	}
}

// WorkPath is where a command of spec sees its work directory: /work
// under bubblewrap, the directory itself under the native backend.
func (s *Sandbox) WorkPath(spec Spec) string { return s.backend.workPath(spec) }

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
// another command's end. exited is closed once the first process has
// exited, before it is reaped: the thread's wait is the only one (a
// started process that lives for minutes holds one thread, not two).
func startOnOwnThread(cmd *exec.Cmd) (exited <-chan struct{}, err error) {
	started := make(chan error, 1)
	gone := make(chan struct{})
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
		close(gone)
	}()
	return gone, <-started
}
