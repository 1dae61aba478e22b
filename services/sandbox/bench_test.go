package sandbox

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSandboxTrue runs `true` through the runner (bubblewrap, a
// cgroup, resource limits) and, alternately in the same loop, the same
// bwrap command line directly, and reports both medians and their ratio.
func BenchmarkSandboxTrue(b *testing.B) {
	root := workRoot(b)
	s := Probe(context.Background(), Bubblewrap, root, quiet)
	if !s.Available() {
		b.Skip("bubblewrap unavailable: " + s.Status().Reason)
	}
	dir := root + "/p/s"
	f, err := s.PrepareDir(root, "p", "s")
	if err != nil {
		b.Fatal(err)
	}
	f.Close()
	spec := Spec{Argv: []string{"true"}, Dir: dir, Env: DefaultEnv("/work")}
	args := append(bwrapArgs(spec), "--bind", dir, "/work", "--", "true")
	// bwrapArgs blocks on fd 3; the direct run gets an fd 3 at EOF.
	var runner, direct []time.Duration
	for b.Loop() {
		t := time.Now()
		res, err := s.Run(context.Background(), spec)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("runner: %v %+v", err, res)
		}
		runner = append(runner, time.Since(t))

		t = time.Now()
		cmd := exec.Command(s.backend.(bwrap).path, args...)
		cmd.Env = spec.Env
		cmd.ExtraFiles = []*os.File{devNull(b)}
		if s.drop {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: SandboxUID, Gid: SandboxGID, Groups: []uint32{}}}
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("direct bwrap: %v %s", err, out)
		}
		direct = append(direct, time.Since(t))
	}
	r, d := median(runner), median(direct)
	b.ReportMetric(float64(r.Microseconds())/1000, "runner-p50-ms")
	b.ReportMetric(float64(d.Microseconds())/1000, "bwrap-p50-ms")
	b.ReportMetric(float64(r)/float64(d), "ratio")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func devNull(b *testing.B) *os.File {
	f, err := os.Open(os.DevNull)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return f
}
