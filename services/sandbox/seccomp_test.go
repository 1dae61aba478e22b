package sandbox

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/sys/unix"
)

// isolatedProbe is the Python the probes below share: isolated(label,
// call) runs call() in a child of its own and prints "label result"; a
// child killed by a signal is reported as "label -signal".
const isolatedProbe = `
import os, sys

def isolated(label, call):
	sys.stdout.flush()
	pid = os.fork()
	if pid == 0:
		try:
			print(label, call())
			sys.stdout.flush()
		finally:
			os._exit(0)
	_, status = os.waitpid(pid, 0)
	if os.WIFSIGNALED(status):
		print(label, -os.WTERMSIG(status))
`

// syscallProbe calls each system call (numbers from the Go side, so any
// architecture) with arguments that, without the filter, fail with another
// error than EPERM or succeed, and prints "name errno" for each; "i386" is
// keyctl through int 0x80 (x86-64 only), which the library's own
// architecture check lets through unfiltered. Each call is made in a child
// of its own, so one that kills its process (a kernel without IA32
// emulation answers int 0x80 with SIGSEGV, a filter that kills instead of
// refusing sends SIGSYS) is reported as "name -signal" and the others are
// still tried.
const syscallProbe = isolatedProbe + `
import ctypes, json, mmap, platform
libc = ctypes.CDLL(None, use_errno=True)
nr = json.loads(sys.argv[1])
calls = {
	"ptrace": (0, 0, 0, 0),                 # PTRACE_TRACEME: succeeds
	"mount": (0, 0, 1, 0, 0),               # a bad type pointer: EFAULT
	"unshare": (0x10000000,),               # CLONE_NEWUSER: ENOSPC under --disable-userns
	"setns": (-1, 0),                       # EBADF
	"keyctl": (0, -3, 1),                   # the session keyring's id: succeeds
	"add_key": (0, 0, 0, 0, 0),             # EFAULT
	"bpf": (9999, 0, 0),                    # no such command: EINVAL
	"perf_event_open": (0, 0, -1, -1, 0),   # no attributes: EFAULT
	"io_uring_setup": (1, 0),               # no parameters: EFAULT
	"userfaultfd": (1,),                    # UFFD_USER_MODE_ONLY: succeeds
	"process_vm_readv": (os.getpid(), 0, 0, 0, 0, 0),  # nothing to read: succeeds
	"fsopen": (0, 0),                       # EFAULT
	"open_tree": (-1, 0, 0),                # EFAULT
	"pidfd_getfd": (-1, 0, 0),              # EBADF
	"clone": (0x10000000 | 17, 0, 0, 0, 0), # a user namespace: ENOSPC, or a child
	"clone3": (0, 0),                       # a bad size: EINVAL
}

def syscall(name, args):
	def call():
		ctypes.set_errno(0)
		r = libc.syscall(ctypes.c_long(nr[name]), *[ctypes.c_long(a) for a in args])
		if r == 0 and name == "clone":
			os._exit(0)  # the new child: the parent prints
		return ctypes.get_errno() if r == -1 else 0
	return call

def i386_keyctl():
	# push rbx; mov eax, 288 (i386 keyctl); xor ebx, ebx; mov ecx, -3; xor edx, edx; int 0x80; pop rbx; ret
	code = bytes([0x53, 0xb8, 0x20, 0x01, 0, 0, 0x31, 0xdb, 0xb9, 0xfd, 0xff, 0xff, 0xff, 0x31, 0xd2, 0xcd, 0x80, 0x5b, 0xc3])
	m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
	m.write(code)
	r = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))()
	return -r if r < 0 else 0

for name, args in calls.items():
	isolated(name, syscall(name, args))
if platform.machine() == "x86_64":
	isolated("i386", i386_keyctl)
# clone3 refused, threads and processes still start (libc falls back to clone).
import subprocess, threading
th = threading.Thread(target=lambda: None)
th.start()
th.join()
print("spawn", subprocess.run(["true"]).returncode)
`

// Inside the sandbox the filter refuses what a tool never needs: each
// call below succeeds or fails otherwise without it.
func TestSeccompDenies(t *testing.T) {
	info, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]syscall.Errno{"clone3": syscall.ENOSYS, "spawn": 0}
	nrs := map[string]int{}
	for _, name := range []string{"ptrace", "mount", "unshare", "setns", "keyctl", "add_key", "bpf", "perf_event_open",
		"io_uring_setup", "userfaultfd", "process_vm_readv", "fsopen", "open_tree", "pidfd_getfd", "clone", "clone3"} {
		nrs[name] = info.SyscallNames[name]
		if _, ok := want[name]; !ok {
			want[name] = syscall.EPERM
		}
	}
	if info.Name == "x86_64" {
		want["i386"] = syscall.ENOSYS
	}
	arg, _ := json.Marshal(nrs)
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			if !strings.HasPrefix(s.Status().Seccomp, "deny ") {
				t.Errorf("status says no filter: %+v", s.Status())
			}
			dir := workDir(t, s)
			res := run(t, s, 30*time.Second, Spec{Argv: []string{"python3", "-c", syscallProbe, string(arg)}, Dir: dir})
			if res.ExitCode != 0 {
				t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			got := map[string]int{} // an errno, or minus the signal that killed the call's process
			for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
				var n string
				var e int
				if _, err := fmt.Sscan(line, &n, &e); err == nil {
					got[n] = e
				}
				if n == "i386" && e == -int(syscall.SIGSEGV) {
					// The kernel runs no 32-bit system calls (no IA32
					// emulation, as on some VMs): nothing to filter there.
					t.Log("the kernel has no IA32 emulation: int 0x80 ends the process whatever the filter")
					delete(want, "i386")
				}
			}
			for n, e := range want {
				g, ok := got[n]
				switch {
				case !ok:
					t.Errorf("%s: no result (probe output: %q)", n, res.Stdout)
				case g < 0:
					t.Errorf("%s: the call killed its process with %v, want errno %v", n, syscall.Signal(-g), e)
				case syscall.Errno(g) != e:
					t.Errorf("%s: errno %d (%v), want %v", n, g, syscall.Errno(g), e)
				}
			}
		})
	}
}

// socketProbe tries every address family given (argv[1], a JSON list)
// with each socket type, socketpair with each family, and socket through
// the raw system call with the family's upper 32 bits set (the kernel reads
// an int; a filter comparing 64 bits must not be fooled into allowing it).
// It prints "socket family type errno" (0: created), "pair family errno" and
// "wide family errno". Each attempt runs in a child of its own, so one that
// kills its process is reported as -signal and the others still run.
const socketProbe = isolatedProbe + `
import ctypes, json, socket
libc = ctypes.CDLL(None, use_errno=True)
families = json.loads(sys.argv[1])
SYS_socket = int(sys.argv[2])

def errno_of(make):
	# 0 when make() returns the sockets, else the errno it failed with.
	def call():
		try:
			for s in make():
				s.close()
			return 0
		except OSError as e:
			return e.errno
	return call

def make(family, kind):
	return errno_of(lambda: [socket.socket(family, kind, 0)])

def pair(family):
	return errno_of(lambda: socket.socketpair(family, socket.SOCK_STREAM, 0))

def wide(family):
	def call():
		ctypes.set_errno(0)
		fd = libc.syscall(ctypes.c_long(SYS_socket), ctypes.c_long((1 << 32) | family), ctypes.c_long(socket.SOCK_STREAM), ctypes.c_long(0))
		if fd >= 0:
			os.close(fd)
			return 0
		return ctypes.get_errno()
	return call

for f in families:
	for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_RAW, socket.SOCK_SEQPACKET):
		isolated("socket %d %d" % (f, kind), make(f, kind))
	isolated("pair %d" % f, pair(f))
	isolated("wide %d" % f, wide(f))
`

// Inside the sandbox only unix, inet and inet6 sockets can be made: an
// agent's command reaching the host through vsock (which no network
// namespace isolates), netlink, packet sockets or the kernel's crypto and
// key sockets is refused with EAFNOSUPPORT, for every socket type, through
// socketpair, and with the family's upper bits set.
func TestSeccompSocketFamilies(t *testing.T) {
	info, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	named := map[int]string{
		unix.AF_UNIX: "unix", unix.AF_INET: "inet", unix.AF_INET6: "inet6",
		unix.AF_VSOCK: "vsock", unix.AF_NETLINK: "netlink", unix.AF_PACKET: "packet",
		unix.AF_BLUETOOTH: "bluetooth", unix.AF_ALG: "alg", unix.AF_KEY: "key", unix.AF_XDP: "xdp",
		unix.AF_TIPC: "tipc", unix.AF_RDS: "rds", unix.AF_CAN: "can", unix.AF_SMC: "smc",
		unix.AF_KCM: "kcm", unix.AF_QIPCRTR: "qipcrtr", unix.AF_MCTP: "mctp", unix.AF_RXRPC: "rxrpc",
		unix.AF_PPPOX: "pppox", unix.AF_IB: "ib", unix.AF_UNSPEC: "unspec",
	}
	// Every family the kernel numbers and a few past the end.
	families := []int{}
	for f := 0; f < unix.AF_MAX+4; f++ {
		families = append(families, f)
	}
	famArg, _ := json.Marshal(families)
	name := func(f int) string {
		if n, ok := named[f]; ok {
			return n
		}
		return fmt.Sprintf("family %d", f)
	}
	allowed := func(f int) bool { return f == unix.AF_UNIX || f == unix.AF_INET || f == unix.AF_INET6 }
	for backend, s := range backends(t) {
		t.Run(backend, func(t *testing.T) {
			dir := workDir(t, s)
			res := run(t, s, 60*time.Second, Spec{Argv: []string{"python3", "-c", socketProbe, string(famArg), fmt.Sprint(info.SyscallNames["socket"])}, Dir: dir})
			if res.ExitCode != 0 {
				t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			got := map[string]int{}
			for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
				i := strings.LastIndexByte(line, ' ')
				e, err := strconv.Atoi(line[i+1:])
				if i < 0 || err != nil {
					t.Fatalf("probe line %q", line)
				}
				got[line[:i]] = e
			}
			result := func(label string) (int, bool) {
				e, ok := got[label]
				if !ok {
					t.Errorf("%s: no result (probe output: %q, stderr %q)", label, res.Stdout, res.Stderr)
				} else if e < 0 {
					t.Errorf("%s: the call killed its process with %v", label, syscall.Signal(-e))
				}
				return e, ok && e >= 0
			}
			for _, f := range families {
				if allowed(f) {
					for _, kind := range []int{unix.SOCK_STREAM, unix.SOCK_DGRAM} {
						if e, ok := result(fmt.Sprintf("socket %d %d", f, kind)); ok && e != 0 {
							t.Errorf("%s socket of type %d refused: %v", name(f), kind, syscall.Errno(e))
						}
					}
					continue
				}
				for _, kind := range []int{unix.SOCK_STREAM, unix.SOCK_DGRAM, unix.SOCK_RAW, unix.SOCK_SEQPACKET} {
					if e, ok := result(fmt.Sprintf("socket %d %d", f, kind)); ok && syscall.Errno(e) != syscall.EAFNOSUPPORT {
						t.Errorf("%s socket of type %d: errno %d (%v), want EAFNOSUPPORT", name(f), kind, e, syscall.Errno(e))
					}
				}
				if e, ok := result(fmt.Sprintf("pair %d", f)); ok && syscall.Errno(e) != syscall.EAFNOSUPPORT {
					t.Errorf("%s socketpair: errno %d (%v), want EAFNOSUPPORT", name(f), e, syscall.Errno(e))
				}
			}
			if e, ok := result(fmt.Sprintf("pair %d", unix.AF_UNIX)); ok && e != 0 {
				t.Errorf("unix socketpair refused: %v", syscall.Errno(e))
			}
			// Upper bits set: whatever the family's low 32 bits, the
			// filter refuses, so vsock cannot be reached that way either.
			for _, f := range []int{unix.AF_VSOCK, unix.AF_NETLINK, unix.AF_ALG} {
				if e, ok := result(fmt.Sprintf("wide %d", f)); ok && syscall.Errno(e) != syscall.EAFNOSUPPORT {
					t.Errorf("%s with the upper bits set: errno %d (%v), want EAFNOSUPPORT", name(f), e, syscall.Errno(e))
				}
			}
		})
	}
}
