package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"toolbelt/internal/poll"
)

func TestStatusIDs(t *testing.T) {
	cases := []struct {
		name, status string
		uid          string
		threads      int
		ok           bool
	}{
		{"process", "Name:\tsh\nUid:\t65534\t65534\t65534\t65534\nGid:\t65534\t65534\t65534\t65534\nThreads:\t3\n", "65534", 3, true},
		{"real uid is the first field", "Uid:\t1000\t0\t0\t0\nThreads:\t1\n", "1000", 1, true},
		{"no threads line", "Uid:\t1000\t1000\t1000\t1000\n", "1000", 0, false},
		{"no uid line", "Threads:\t2\n", "", 2, false},
		{"cut short", "Uid:", "", 0, false},
		{"empty", "", "", 0, false},
		{"a name that looks like a key", "Name:\tUid: 7\nUid:\t5\t5\t5\t5\nThreads:\t1\n", "5", 1, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			uid, threads, ok := statusIDs([]byte(c.status))
			if uid != c.uid || threads != c.threads || ok != c.ok {
				t.Errorf("statusIDs = %q, %d, %v; want %q, %d, %v", uid, threads, ok, c.uid, c.threads, c.ok)
			}
		})
	}
}

// tasksOf counts this process's threads among its uid's tasks.
func TestTasksOfCountsThreads(t *testing.T) {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc")
	}
	_, own, ok := statusIDs(raw)
	if !ok || own < 1 {
		t.Fatalf("own status unreadable: %q", raw)
	}
	// Threads locked to goroutines are counted too.
	const extra = 4
	release := make(chan struct{})
	started := make(chan struct{})
	for range extra {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			started <- struct{}{}
			<-release
		}()
	}
	for range extra {
		<-started
	}
	defer close(release)
	if got := tasksOf(os.Getuid()); got < extra+1 {
		t.Errorf("tasksOf(own uid) = %d with %d threads locked here", got, extra)
	}
	if got := tasksOf(1<<31 - 2); got != 0 {
		t.Errorf("tasksOf(an unused uid) = %d", got)
	}
}

// Without a cgroup, a run whose processes fill its cap does not stop the
// runs that start beside it: RLIMIT_NPROC counts the whole uid, and with a
// cap of Procs alone every other run's bubblewrap failed ("Creating new
// namespace failed: Resource temporarily unavailable").
func TestProcessCapIsPerRunWithoutCgroup(t *testing.T) {
	for name, s := range backends(t) {
		if s.cgroups != nil {
			continue // a cgroup counts each run on its own
		}
		t.Run(name, func(t *testing.T) {
			const procs = 16
			uid := s.runUID()
			before := tasksOf(uid)
			// The hog forks until the kernel refuses it, then says so in
			// its work directory and keeps what it has (sh would give up).
			// That refusal, not a count, tells the test it is at its cap:
			// the cap is the uid's tasks when the hog starts plus procs,
			// and other runs under the same uid come and go meanwhile.
			const hog = `import os, time
for i in range(512):
    try:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
    except OSError:
        open("hog-full", "w").close()
        break
time.sleep(30)`
			dir := workDir(t, s)
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			done := make(chan *Result, 1)
			start := time.Now()
			go func() {
				res, _ := s.Run(ctx, Spec{Argv: []string{"python3", "-c", hog}, Dir: dir, Limits: Limits{Procs: procs}})
				done <- res
			}()
			poll.Until(t, 20*time.Second, "the hog refused a fork", func() (bool, string) {
				_, err := os.Stat(filepath.Join(dir, "hog-full"))
				return err == nil, fmt.Sprintf("%d processes, its uid %d tasks (%d before)", countProcs("python3", "-c", hog), tasksOf(uid), before)
			})
			res := run(t, s, 20*time.Second, Spec{Argv: []string{"sh", "-c", "(echo forked) & wait"}, Dir: workDir(t, s), Limits: Limits{Procs: procs}})
			if res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "forked") {
				t.Errorf("a run beside a full one: exit %d, limit %q, stderr %q", res.ExitCode, res.Limit, res.Stderr)
			}
			// In bubblewrap's user namespace the cap is the run's own:
			// its init and the hog's processes together hold procs tasks,
			// whatever the rest of the uid does.
			if strings.HasPrefix(name, Bubblewrap) {
				if n := countProcs("python3", "-c", hog); n > procs-1 || n < procs-4 {
					t.Errorf("the hog holds %d processes under a cap of %d tasks (its init among them)", n, procs)
				}
			}
			cancel()
			<-done
			waitGone(t, start, func() int { return countProcs("python3", "-c", hog) })
		})
	}
}

// BenchmarkTasksOf is what a run without a cgroup pays to count its uid's
// tasks before it starts.
func BenchmarkTasksOf(b *testing.B) {
	uid := os.Getuid()
	for b.Loop() {
		tasksOf(uid)
	}
}
