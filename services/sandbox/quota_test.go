package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// diskSlack is what a run may leave above its quota in TestDiskQuota*:
// the writes made between a measure that finds the directory over and the
// kill (see the package's security notes). Measured on 2 cores under the
// race detector: at most 1.2 MiB at load 5 to 14; with six busy loops
// added, up to 9.5 MiB, when a garbage collection stalled the watch's
// thread for 76 ms; with the whole test suite running beside it, up to
// 32 MiB (a 64 MiB write finished before the first measure), and once in
// CI 76 MiB (eight writing processes). The scripts write diskWrites,
// sixteen times the quota, so that a run held to the quota and the slack
// was stopped before it wrote a third of it: the test proves the run was
// stopped, not how fast.
const (
	diskQuota  = 32 << 20
	diskSlack  = 128 << 20
	diskWrites = 16 * diskQuota
)

func TestFileSizeLimit(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			dir := workDir(t, s)
			for _, argv := range [][]string{
				{"sh", "-c", "head -c 4194304 /dev/zero > big"},
				// Python ignores SIGXFSZ: the write fails with EFBIG.
				{"python3", "-c", "open('big', 'wb').write(b'x' * (4 << 20))"},
			} {
				res := run(t, s, 20*time.Second, Spec{Argv: argv, Dir: dir, Limits: Limits{FileSize: 1 << 20}})
				if res.Limit != LimitFileSize || res.ExitCode == 0 {
					t.Errorf("%s: writing 4 MiB under a 1 MiB cap: exit %d, limit %q, stderr %q", argv[0], res.ExitCode, res.Limit, res.Stderr)
				}
				if st, err := os.Stat(filepath.Join(dir, "big")); err != nil || st.Size() > 1<<20 {
					t.Errorf("%s: the file is %v bytes (%v)", argv[0], st.Size(), err)
				}
			}
			// Under the cap: no limit.
			res := run(t, s, 20*time.Second, Spec{Argv: []string{"sh", "-c", "head -c 1000 /dev/zero > small"}, Dir: dir, Limits: Limits{FileSize: 1 << 20}})
			if res.Limit != "" || res.ExitCode != 0 {
				t.Errorf("a small file: exit %d, limit %q, stderr %q", res.ExitCode, res.Limit, res.Stderr)
			}
		})
	}
}

// A command writing four times its quota, in one file or in many, is
// stopped with LimitDisk, and the host directory holds at most the quota
// and diskSlack afterwards: it was stopped well before it wrote all. The
// overshoot itself depends on how loaded the host is (the watch measures
// after the fact), so it is logged, not asserted tightly: a quiet 2-core
// host measured at most 1.8 MiB.
func TestDiskQuota(t *testing.T) {
	const quota = diskQuota
	scripts := map[string]string{
		"one file": fmt.Sprintf("head -c %d /dev/zero > big", diskWrites),
		"many files": fmt.Sprintf(`import os
for i in range(%d):
	with open('f%%d' %% i, 'wb') as f:
		f.write(b'x' * (64 << 10))
`, diskWrites/(64<<10)),
		"many processes": fmt.Sprintf("for i in 1 2 3 4 5 6 7 8; do (for j in $(seq %d); do head -c 65536 /dev/zero > p$i-$j; done) & done; wait", diskWrites/8/(64<<10)),
	}
	for name, s := range backends(t) {
		for what, script := range scripts {
			t.Run(name+"/"+what, func(t *testing.T) {
				dir := workDir(t, s)
				argv := []string{"sh", "-c", script}
				if strings.HasPrefix(script, "import") {
					argv = []string{"python3", "-c", script}
				}
				res := run(t, s, 30*time.Second, Spec{Argv: argv, Dir: dir, Limits: Limits{Disk: quota}})
				used, err := DirUsage(dir)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("usage after the run %d bytes, %+d over the quota; limit %q, exit %d", used, used-quota, res.Limit, res.ExitCode)
				if res.Limit != LimitDisk {
					t.Errorf("writing %d MiB under a %d MiB quota: limit %q, exit %d, stderr %q", diskWrites>>20, quota>>20, res.Limit, res.ExitCode, res.Stderr)
				}
				if used > quota+diskSlack {
					t.Errorf("the directory holds %d bytes, more than the quota %d and the slack %d", used, quota, diskSlack)
				}
			})
		}
	}
}

// A work directory already at its quota runs its command with no room to
// grow (so it can free space); one below it caps
// each file at what is left, so a single file cannot pass it.
func TestDiskQuotaFull(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			dir := workDir(t, s)
			if err := os.WriteFile(filepath.Join(dir, "old"), make([]byte, 1<<20), 0o644); err != nil {
				t.Fatal(err)
			}
			used, err := DirUsage(dir)
			if err != nil {
				t.Fatal(err)
			}
			// Full: nothing may grow, but the command runs, so it can
			// free space (the session has no other way to).
			res := run(t, s, 20*time.Second, Spec{Argv: []string{"sh", "-c", "echo data > ran"}, Dir: dir, Limits: Limits{Disk: used}})
			if res.Limit != LimitDisk || res.ExitCode == 0 {
				t.Errorf("at the quota: exit %d, limit %q", res.ExitCode, res.Limit)
			}
			if info, err := os.Stat(filepath.Join(dir, "ran")); err == nil && info.Size() > 1 {
				t.Errorf("a file grew with no room left: %d bytes", info.Size())
			}
			res = run(t, s, 20*time.Second, Spec{Argv: []string{"rm", "-f", "old", "ran"}, Dir: dir, Limits: Limits{Disk: used}})
			if res.Limit != "" || res.ExitCode != 0 {
				t.Errorf("freeing space at the quota: exit %d, limit %q: %s", res.ExitCode, res.Limit, res.Stderr)
			}
			if after, _ := DirUsage(dir); after >= used {
				t.Errorf("usage %d after freeing, was %d", after, used)
			}
			if err := os.WriteFile(filepath.Join(dir, "old"), make([]byte, 1<<20), 0o644); err != nil {
				t.Fatal(err)
			}
			if used, err = DirUsage(dir); err != nil {
				t.Fatal(err)
			}
			res = run(t, s, 20*time.Second, Spec{Argv: []string{"sh", "-c", "head -c 2097152 /dev/zero > big"}, Dir: dir, Limits: Limits{Disk: used + 64<<10}})
			if res.Limit != LimitDisk {
				t.Errorf("64 KiB left, 2 MiB written: exit %d, limit %q", res.ExitCode, res.Limit)
			}
			if after, _ := DirUsage(dir); after > used+64<<10+4096 {
				t.Errorf("usage %d, quota %d", after, used+64<<10)
			}
		})
	}
}

// DirUsage counts allocated blocks, follows no link and counts a hard
// link once.
func TestDirUsage(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "data"), filepath.Join(dir, "again")); err != nil {
		t.Fatal(err)
	}
	// Sparse: 1 GiB long, nothing allocated.
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, target := range []string{"/usr", "/", filepath.Join(dir, "data")} {
		if err := os.Symlink(target, filepath.Join(dir, "link"+filepath.Base(target))); err != nil {
			t.Fatal(err)
		}
	}
	used, err := DirUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if used < 1<<20 || used > 1<<20+64<<10 {
		t.Errorf("usage %d, want 1 MiB and a few blocks", used)
	}
	if err := os.Symlink("/usr", filepath.Join(dir, "top")); err != nil {
		t.Fatal(err)
	}
	if _, err := DirUsage(filepath.Join(dir, "top")); err == nil {
		t.Error("DirUsage followed a link given as the directory")
	}
}

// Files held open but named by no directory entry (unlinked after open, or
// O_TMPFILE) take disk space that no walk of the directory sees: the
// watch counts them too (issue 14 review: 3 GB written past a 1 GiB
// quota this way, the call succeeded).
func TestDiskQuotaCountsOpenDeletedFiles(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			for _, how := range []string{"tmpfile", "unlinked", "mapped"} {
				if how == "mapped" && os.Geteuid() != 0 {
					continue // /proc/<pid>/map_files needs CAP_SYS_ADMIN
				}
				prog := `import os, time, ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
fds = []
for i in range(8):
    if '` + how + `' == 'tmpfile':
        fd = os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o600)
    else:
        fd = os.open('f%d' % i, os.O_CREAT | os.O_RDWR, 0o600)
        os.unlink('f%d' % i)
    for _ in range(4):
        os.write(fd, b'x' * (1 << 20))
    if '` + how + `' == 'mapped':
        libc.mmap(None, 4 << 20, 3, 1, fd, 0)  # PROT_READ|PROT_WRITE, MAP_SHARED
        os.close(fd)
    else:
        fds.append(fd)
print('wrote', flush=True)
time.sleep(20)
`
				res := run(t, s, 40*time.Second, Spec{Argv: []string{"python3", "-c", prog}, Dir: workDir(t, s), Limits: Limits{Disk: 8 << 20}})
				if res.Limit != LimitDisk {
					t.Errorf("%s: 32 MiB held in deleted files under an 8 MiB quota: limit %q, exit %d, %s %s", how, res.Limit, res.ExitCode, res.Stdout, res.Stderr)
				}
			}
		})
	}
}

// A work directory past the walk's bounds (deeper than it measures)
// cannot be held to a quota: no run starts in it, with a message that
// says why and what to do, and a run that makes such a tree is stopped.
// (Letting runs delete in it let them grow it past what is measured:
// 150 MB in a 16 MiB session, issue 14's second review.)
func TestDiskQuotaTooDeepRefused(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			dir := workDir(t, s)
			res := run(t, s, 30*time.Second, Spec{Argv: []string{"python3", "-c", "import os, time\nos.makedirs('/'.join(['d'] * 140))\ntime.sleep(5)"},
				Dir: dir, Limits: Limits{Disk: 1 << 20}})
			if res.Limit != LimitDisk {
				t.Fatalf("making a tree past the walk's bounds: exit %d, limit %q: %s", res.ExitCode, res.Limit, res.Stderr)
			}
			res = run(t, s, 30*time.Second, Spec{Argv: []string{"sh", "-c", "echo ran > ran"}, Dir: dir, Limits: Limits{Disk: 1 << 20}})
			if res.Limit != LimitDisk || !strings.Contains(string(res.Stderr), "use another session") {
				t.Fatalf("a run in a tree past the bounds: exit %d, limit %q: %s", res.ExitCode, res.Limit, res.Stderr)
			}
			if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
				t.Error("the command ran")
			}
		})
	}
}
