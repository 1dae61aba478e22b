package sandbox

import (
	"sync"
	"testing"
	"time"
)

// Commands run side by side are not killed by one another's end. The
// kernel sends a command its parent-death signal (SIGKILL) when the thread
// that started it exits, and a disk watch ends its locked thread with it:
// a command started on a thread that a watch then took (and ended) died
// with exit code 137 while its call was reported as succeeded.
func TestConcurrentRunsOutliveOtherRunsThreads(t *testing.T) {
	for name, s := range backends(t) {
		if name == Native+"+rlimits" {
			continue // as root, RLIMIT_NPROC counts every run of uid 65534 together: 68 at once pass it
		}
		t.Run(name, func(t *testing.T) {
			const long, short = 8, 60
			codes := make([]int, long)
			stderr := make([]string, long)
			var wg sync.WaitGroup
			for i := range long {
				wg.Go(func() {
					res := run(t, s, 30*time.Second, Spec{Argv: []string{"sleep", "1"}, Dir: workDir(t, s), Limits: Limits{Disk: diskQuota}})
					codes[i], stderr[i] = res.ExitCode, string(res.Stderr)+" limit "+string(res.Limit)
				})
			}
			for range short {
				wg.Go(func() {
					run(t, s, 30*time.Second, Spec{Argv: []string{"true"}, Dir: workDir(t, s), Limits: Limits{Disk: diskQuota}})
				})
			}
			wg.Wait()
			for i, code := range codes {
				if code != 0 {
					t.Errorf("long command %d exited %d while short ones ran beside it: %s", i, code, stderr[i])
				}
			}
		})
	}
}
