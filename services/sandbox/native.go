package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"
)

// native runs commands without bubblewrap: new pid, mount, IPC, UTS and
// (unless the tool needs it) network namespaces from SysProcAttr, then a
// re-executed helper that, before exec, waits to be put in its cgroup,
// confines the file system with landlock (read-only system directories,
// the work directory writable), drops to the sandbox uid, and loads a
// seccomp filter against the system calls a tool never needs.
type native struct{}

func (native) name() string { return "native" }

func (native) workPath(spec Spec) string { return spec.Dir }

// wrappers: none, the helper executes the command (pid 1 of its pid
// namespace).
func (native) wrappers() int { return 0 }

// helperArg is the argument that makes this binary the helper (see init).
const helperArg = "__toolbelt_sandbox_init"

// helperConfig is what the helper needs, passed in its environment.
type helperConfig struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	Drop bool     `json:"drop"`
	// Limits are set by the helper on itself.
	Limits []rlimit `json:"limits"`
}

const helperEnv = "TOOLBELT_SANDBOX_HELPER"

func (native) command(spec Spec, drop bool, limits []rlimit) (*exec.Cmd, error) {
	if spec.Dir == "" {
		return nil, errors.New("sandbox: the native backend needs Spec.Dir")
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cfg, err := json.Marshal(helperConfig{Argv: spec.Argv, Env: spec.Env, Dir: spec.Dir, Drop: drop, Limits: limits})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, helperArg)
	cmd.Env = []string{helperEnv + "=" + string(cfg)}
	flags := uintptr(syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS)
	if !spec.Network {
		flags |= syscall.CLONE_NEWNET
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
	if os.Geteuid() != 0 {
		// Without root the namespaces need a user namespace; the command
		// keeps the server's uid inside it.
		uid, gid := os.Geteuid(), os.Getegid()
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	}
	return cmd, nil
}

func init() {
	if len(os.Args) == 2 && os.Args[1] == helperArg && os.Getenv(helperEnv) != "" {
		err := helperMain()
		fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
		os.Exit(126)
	}
}

// helperMain confines this process and executes the command; it returns
// only on failure.
func helperMain() error {
	runtime.LockOSThread()
	var cfg helperConfig
	if err := json.Unmarshal([]byte(os.Getenv(helperEnv)), &cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	// Wait for the runner to put this process in its cgroup.
	release := os.NewFile(3, "release")
	_, _ = release.Read(make([]byte, 1))
	release.Close()
	if err := os.Chdir(cfg.Dir); err != nil {
		return err
	}
	path, err := lookPath(cfg.Argv[0], cfg.Env)
	if err != nil {
		return err
	}
	// Mounts made inside stay inside; /proc shows this pid namespace only
	// (libpsx, which landlock uses to reach every thread, reads it too).
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if err := landlock.V5.RestrictPaths(
		landlock.RODirs("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc").IgnoreIfMissing(),
		landlock.RODirs("/proc").IgnoreIfMissing(),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/tty").IgnoreIfMissing(),
		landlock.ROFiles("/dev/urandom", "/dev/random").IgnoreIfMissing(),
		landlock.RWDirs(cfg.Dir),
	); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if cfg.Drop {
		if err := syscall.Setgroups(nil); err != nil {
			return err
		}
		if err := syscall.Setgid(SandboxGID); err != nil {
			return err
		}
		if err := syscall.Setuid(SandboxUID); err != nil {
			return err
		}
	}
	filter, err := buildSeccomp()
	if err != nil {
		return err
	}
	if err := filter.load(); err != nil {
		return err
	}
	argv := cfg.Argv
	if len(cfg.Limits) > 0 {
		// prlimit(1) sets the limits on itself and executes the command:
		// this helper's own memory (large under the race detector) is not
		// held to the command's limit.
		pre := []string{"prlimit"}
		for _, r := range cfg.Limits {
			pre = append(pre, fmt.Sprintf("%s=%d", r.Flag, r.Value))
		}
		argv = append(append(pre, "--", path), cfg.Argv[1:]...)
		if path, err = lookPath("prlimit", cfg.Env); err != nil {
			return err
		}
	}
	return syscall.Exec(path, argv, cfg.Env)
}

// lookPath finds the command on the PATH of its environment.
func lookPath(name string, env []string) (string, error) {
	if filepath.IsAbs(name) || filepath.Base(name) != name {
		return name, nil
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = p
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: command not found", name)
}
