package sandbox

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/elastic/go-seccomp-bpf/arch"
)

// syscallProbe calls each system call (numbers from the Go side, so any
// architecture) with arguments that, without the filter, fail with another
// error than EPERM or succeed, and prints "name errno" for each; "i386" is
// keyctl through int 0x80 (x86-64 only), which the library's own
// architecture check lets through unfiltered. Each call is made in a child
// of its own, so one that kills its process (a kernel without IA32
// emulation answers int 0x80 with SIGSEGV, a filter that kills instead of
// refusing sends SIGSYS) is reported as "name -signal" and the others are
// still tried.
const syscallProbe = `
import ctypes, json, mmap, os, platform, sys
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

def isolated(name, call):
	# call() returns the errno; the child prints it, the parent reports a
	# child killed by a signal as -signal.
	sys.stdout.flush()
	pid = os.fork()
	if pid == 0:
		try:
			print(name, call())
			sys.stdout.flush()
		finally:
			os._exit(0)
	_, status = os.waitpid(pid, 0)
	if os.WIFSIGNALED(status):
		print(name, -os.WTERMSIG(status))

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
