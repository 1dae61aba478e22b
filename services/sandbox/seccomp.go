package sandbox

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/sys/unix"
)

// deniedSyscalls are refused (EPERM) in both backends: they change the
// kernel, mounts or namespaces, reach into other processes, or open the
// kernel's largest attack surfaces (BPF, perf, io_uring, keyrings,
// userfaultfd), none of which a tool needs. Names this architecture does
// not have are skipped.
var deniedSyscalls = []string{
	// mounts and the file system tree
	"mount", "umount2", "pivot_root", "chroot", "mount_setattr",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "open_tree_attr",
	"open_by_handle_at", "name_to_handle_at", "quotactl", "quotactl_fd",
	// namespaces
	"unshare", "setns",
	// other processes
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
	// kernel attack surface
	"bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
	"io_uring_setup", "io_uring_enter", "io_uring_register", "lookup_dcookie",
	// the machine
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"reboot", "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"syslog", "vhangup", "iopl", "ioperm", "uselib",
	// socket calls multiplexed through one number (i386, s390x, ppc64,
	// none of them x86-64 or arm64): the family sits in memory a filter
	// cannot read, so socketFamilies could not hold. A libc built for
	// kernels older than 4.3 makes every socket call through it, and so
	// has no sockets in the sandbox on those architectures.
	"socketcall",
}

// socketFamilies are the only address families socket(2) and
// socketpair(2) may name; any other fails with EAFNOSUPPORT, as on a
// kernel built without it, so a program falls back as it would there.
// Tools need unix sockets and, with network on, inet and inet6 (with it
// off they reach only the sandbox's own loopback). The rest reach past
// the network namespace or into kernel code no tool needs: vsock talks to
// the hypervisor's host whatever the namespace, netlink configures the
// kernel, packet and XDP sockets see raw frames, alg and key sockets
// drive the crypto and IPsec code, and the long tail (bluetooth, tipc,
// rds, can…) is where socket bugs have been found. Netlink being refused,
// getifaddrs(3) fails inside (there are no interfaces to list but lo).
var socketFamilies = []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6}

// namespaceFlags are clone(2)'s flags that make new namespaces
// (CLONE_NEWTIME is not among them: clone's low byte is the exit signal).
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// seccompFilter is the filter of sandboxed commands, compiled for this
// architecture, with a description for Status.
//
//   - deniedSyscalls fail with EPERM;
//   - clone with a namespace flag fails with EPERM (its flags are the first
//     argument on every architecture Go supports but s390x);
//   - socket and socketpair of a family not in socketFamilies fail with
//     EAFNOSUPPORT (all 64 bits of the family are compared: a family
//     with its upper bits set, which the kernel would truncate, is
//     refused);
//   - clone3, whose flags sit in memory a filter cannot read, fails with
//     ENOSYS, so that libc and Go fall back to clone;
//   - a system call of another ABI than this architecture's (i386 through
//     int 0x80 on x86-64, x32) fails with ENOSYS: the library's own
//     architecture check lets them through unfiltered.
type seccompFilter struct {
	program []unix.SockFilter
	summary string
}

var errnoENOSYS = uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.ENOSYS)

func buildSeccomp() (*seccompFilter, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range deniedSyscalls {
		if _, ok := info.SyscallNames[n]; ok {
			names = append(names, n)
		}
	}
	deny := seccomp.SyscallGroup{Action: seccomp.ActionErrno, Names: names}
	if runtime.GOARCH != "s390x" {
		deny.NamesWithCondtions = []seccomp.NameWithConditions{{
			Name:       "clone",
			Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: namespaceFlags}},
		}}
	}
	policy := seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: []seccomp.SyscallGroup{deny, socketGroup(info)}}
	insts, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp policy: %w", err)
	}
	// Another ABI's calls first: ENOSYS.
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 4}, // seccomp_data.arch
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, K: uint32(info.ID)},
		{Code: unix.BPF_RET | unix.BPF_K, K: errnoENOSYS},
	}
	if n, ok := info.SyscallNames["clone3"]; ok {
		prog = append(prog,
			unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
			unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jf: 1, K: uint32(n | info.SeccompMask)},
			unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: errnoENOSYS},
		)
	}
	for _, in := range insts {
		raw, err := in.Assemble()
		if err != nil {
			return nil, fmt.Errorf("seccomp: %w", err)
		}
		prog = append(prog, unix.SockFilter{Code: raw.Op, Jt: raw.Jt, Jf: raw.Jf, K: raw.K})
	}
	summary := fmt.Sprintf("deny %d system calls and clone with namespace flags (EPERM); sockets but unix, inet and inet6 (EAFNOSUPPORT); clone3 and other ABIs ENOSYS", len(names))
	if runtime.GOARCH == "s390x" {
		summary = fmt.Sprintf("deny %d system calls (EPERM); sockets but unix, inet and inet6 (EAFNOSUPPORT); clone3 and other ABIs ENOSYS", len(names))
	}
	return &seccompFilter{program: prog, summary: summary}, nil
}

// socketGroup refuses socket and socketpair of a family not in
// socketFamilies: all the conditions of one call must hold, so a call
// matches when its family differs from every allowed one.
func socketGroup(info *arch.Info) seccomp.SyscallGroup {
	var other seccomp.ArgumentConditions
	for _, f := range socketFamilies {
		other = append(other, seccomp.Condition{Argument: 0, Operation: seccomp.NotEqual, Value: f})
	}
	g := seccomp.SyscallGroup{Action: seccomp.ActionErrno | seccomp.Action(unix.EAFNOSUPPORT)}
	for _, name := range []string{"socket", "socketpair"} {
		if _, ok := info.SyscallNames[name]; ok {
			g.NamesWithCondtions = append(g.NamesWithCondtions, seccomp.NameWithConditions{Name: name, Conditions: other})
		}
	}
	return g
}

// bytes is the program as bubblewrap's --seccomp reads it: struct
// sock_filter after struct sock_filter, native endian.
func (f *seccompFilter) bytes() []byte {
	out := make([]byte, 0, 8*len(f.program))
	for _, in := range f.program {
		out = binary.NativeEndian.AppendUint16(out, in.Code)
		out = append(out, in.Jt, in.Jf)
		out = binary.NativeEndian.AppendUint32(out, in.K)
	}
	return out
}

// load installs the filter on this process (every thread) with
// no_new_privs set, as the native backend's helper does before exec.
func (f *seccompFilter) load() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	prog := unix.SockFprog{Len: uint16(len(f.program)), Filter: &f.program[0]}
	_, _, errno := syscall.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(f.program)
	if errno != 0 {
		return fmt.Errorf("load seccomp filter: %w", errno)
	}
	return nil
}
