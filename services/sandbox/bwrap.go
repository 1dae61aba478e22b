package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// bwrap runs commands under bubblewrap: every namespace unshared, a user
// namespace in which no further one can be made, no capabilities, a new
// session, read-only system directories, and the work directory the only
// writable place.
type bwrap struct{ path, prlimit string }

func (b bwrap) name() string { return "bubblewrap" }

func (bwrap) workPath(Spec) string { return "/work" }

// bwrapArgs are the options before the command; fd 3 holds it until the
// runner releases it.
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
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--bind", spec.Dir, "/work", "--chdir", "/work",
		"--hostname", "sandbox",
		"--block-fd", "3",
	)
	if spec.Network {
		args = append(args, "--share-net")
	}
	return args
}

// command runs bwrap, through prlimit(1) when there are resource limits to
// set: it sets them on itself and executes bwrap.
func (b bwrap) command(spec Spec, drop bool, limits []rlimit) (*exec.Cmd, error) {
	args := append(bwrapArgs(spec), "--")
	args = append(args, spec.Argv...)
	cmd := exec.Command(b.path, args...)
	if len(limits) > 0 {
		pre := []string{}
		for _, r := range limits {
			pre = append(pre, fmt.Sprintf("%s=%d", r.Flag, r.Value))
		}
		pre = append(pre, "--", b.path)
		cmd = exec.Command(b.prlimit, append(pre, args...)...)
	}
	cmd.Env = spec.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if drop {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: SandboxUID, Gid: SandboxGID, Groups: []uint32{}}
	}
	return cmd, nil
}
