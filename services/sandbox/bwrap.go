package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// bwrap runs commands under bubblewrap: every namespace unshared, a user
// namespace in which no further one can be made, no capabilities, a new
// session, read-only system directories, the work directory the only
// writable place, and the seccomp filter (see seccompFilter).
//
// Its options reach it through a pipe (--args), not its argv: bubblewrap's
// init is pid 1 in the sandbox, where /proc/1/cmdline is readable, and the
// options name the host's work directory.
type bwrap struct {
	path, prlimit string
	filter        *seccompFilter
}

func (b bwrap) name() string { return "bubblewrap" }

func (bwrap) workPath(Spec) string { return "/work" }

// wrappers: bubblewrap (prlimit(1) executes it) and its init, pid 1 of
// the new pid namespace, whose child is the command.
func (bwrap) wrappers() int { return 2 }

// bwrapArgs are the options before the command, but for the work
// directory's mount and the seccomp filter, which command adds; fd 3
// holds the command until the runner releases it.
func bwrapArgs(spec Spec) []string {
	args := []string{
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--ro-bind", "/usr", "/usr",
	}
	// /bin, /lib… are links into /usr on a merged system, directories
	// otherwise.
	for _, dir := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		if target, err := os.Readlink(dir); err == nil {
			args = append(args, "--symlink", target, dir)
		} else if st, err := os.Stat(dir); err == nil && st.IsDir() {
			args = append(args, "--ro-bind", dir, dir)
		}
	}
	args = append(args,
		"--ro-bind", "/etc", "/etc",
		// tmpfs is memory: /tmp and /dev/shm are capped at the memory
		// limit, which the cgroup also charges them to (without one, the
		// caps are all that bounds them).
		"--proc", "/proc", "--dev", "/dev",
		"--size", strconv.FormatInt(spec.Limits.withDefaults().Memory, 10), "--tmpfs", "/tmp",
		"--size", strconv.FormatInt(spec.Limits.withDefaults().Memory, 10), "--tmpfs", "/dev/shm",
		"--chdir", "/work",
		"--hostname", "sandbox",
		"--block-fd", "3",
	)
	if spec.Network {
		args = append(args, "--share-net")
	}
	return args
}

// command runs bwrap, through prlimit(1) when there are resource limits to
// set: it sets them on itself and executes bwrap. Its extra files (fd 4
// on, after the runner's fd 3) are the options' pipe, the seccomp
// program's pipe and, with Spec.DirFD, the work directory: the runner
// closes them once the command has started.
func (b bwrap) command(spec Spec, drop bool, limits []rlimit) (cmd *exec.Cmd, err error) {
	var files []*os.File
	defer func() {
		if err != nil {
			closeAll(files)
		}
	}()
	fd := func(f *os.File) string {
		files = append(files, f)
		return strconv.Itoa(3 + len(files))
	}
	opts := bwrapArgs(spec)
	if spec.DirFD != nil {
		// Mounted from the open directory: no path is resolved again.
		dup, err := unix.FcntlInt(spec.DirFD.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("sandbox: work directory: %w", err)
		}
		opts = append(opts, "--bind-fd", fd(os.NewFile(uintptr(dup), "work")), "/work")
	} else {
		opts = append(opts, "--bind", spec.Dir, "/work")
	}
	// Over the read-only /usr, and apart from the work directory: a mount
	// point made here is made in the sandbox's own root, never on the host.
	for _, m := range spec.Mounts {
		opts = append(opts, "--ro-bind", m.Host, m.At)
	}
	argv := spec.Argv
	if spec.Proxy != "" {
		if argv, err = proxyArgs(spec, fd); err != nil {
			return nil, err
		}
	}
	if b.filter != nil {
		f, err := dataPipe(b.filter.bytes())
		if err != nil {
			return nil, err
		}
		opts = append(opts, "--seccomp", fd(f))
	}
	var data strings.Builder
	for _, o := range opts {
		if strings.IndexByte(o, 0) >= 0 {
			return nil, fmt.Errorf("sandbox: NUL in option %q", o)
		}
		data.WriteString(o)
		data.WriteByte(0)
	}
	argsFile, err := dataPipe([]byte(data.String()))
	if err != nil {
		return nil, err
	}
	limits, inner := perNamespaceProcs(limits, spec.Limits.Procs)
	if inner > 0 {
		argv = append([]string{b.prlimit, fmt.Sprintf("--nproc=%d", inner), "--"}, argv...)
	}
	args := append([]string{"--args", fd(argsFile), "--"}, argv...)
	cmd = exec.Command(b.path, args...)
	if len(limits) > 0 {
		pre := []string{}
		for _, r := range limits {
			pre = append(pre, fmt.Sprintf("%s=%d", r.Flag, r.Value))
		}
		pre = append(pre, "--", b.path)
		cmd = exec.Command(b.prlimit, append(pre, args...)...)
	}
	cmd.ExtraFiles = files
	cmd.Env = spec.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if drop {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: SandboxUID, Gid: SandboxGID, Groups: []uint32{}}
	}
	return cmd, nil
}

// dataPipe returns the read end of a pipe that holds data and then ends.
// A pipe, not a file: once bubblewrap has read it nothing is left to read
// again through /proc/1/fd. data must fit the pipe's buffer (the options
// and the filter are a few KiB; the buffer is grown to hold them).
func dataPipe(data []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if len(data) > 4096 {
		if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, len(data)); err != nil {
			r.Close()
			return nil, fmt.Errorf("sandbox: pipe of %d bytes: %w", len(data), err)
		}
	}
	if _, err := w.Write(data); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// perNamespaceProcs makes the processes limit of a run without a cgroup
// its own. RLIMIT_NPROC is counted per user namespace (Linux 5.14 on):
// inside bubblewrap's, the count is this run's tasks alone, checked
// against the task's own limit; the host uid's count, all runs together,
// is checked against the limit bubblewrap had when it made the namespace.
// So bubblewrap starts with a generous host-wide limit (the tasks the uid
// had at the start, plus Procs × hostRuns: runs side by side, each within
// its own cap, do not refuse each other), and prlimit(1) inside the
// namespace sets Procs before it executes the command. It returns the
// limits bubblewrap starts with and the limit inside (0: none to set).
func perNamespaceProcs(limits []rlimit, procs int) ([]rlimit, int) {
	out := slices.Clone(limits)
	for i, r := range out {
		if r.Resource == unix.RLIMIT_NPROC && procs > 0 {
			out[i].Value = r.Value + uint64(procs)*(hostRuns-1)
			return out, procs
		}
	}
	return limits, 0
}

// hostRuns is how many runs' caps the host-wide limit leaves room for.
const hostRuns = 64
