package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// bubblewrapOnly is the bubblewrap sandbox (with and without a cgroup);
// in CI its absence fails the test (see backends).
func bubblewrapOnly(t *testing.T) map[string]*Sandbox {
	t.Helper()
	out := map[string]*Sandbox{}
	for name, s := range backends(t) {
		if strings.HasPrefix(name, Bubblewrap) {
			out[name] = s
		}
	}
	if len(out) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("bubblewrap unavailable in CI")
		}
		t.Skip("bubblewrap unavailable")
	}
	return out
}

// Nothing a sandboxed command can read in /proc names the host's work
// directory: not bubblewrap's argv (its init is pid 1), not an
// environment, not a descriptor left open. (mountinfo does: see the
// package's security notes.)
func TestNoHostPathInProc(t *testing.T) {
	const script = `for p in /proc/[0-9]*; do
	cat $p/cmdline $p/environ 2>/dev/null; echo
	for f in $p/fd/*; do readlink $f; cat $f/../../../cmdline 2>/dev/null; done
done
echo done`
	for name, s := range bubblewrapOnly(t) {
		for _, byFD := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/dirfd=%v", name, byFD), func(t *testing.T) {
				root := workRoot(t)
				f, err := s.PrepareDir(root, "p1", "session")
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				spec := Spec{Argv: []string{"sh", "-c", script}, Dir: filepath.Join(root, "p1", "session")}
				if byFD {
					spec.DirFD = f
				}
				res := run(t, s, 20*time.Second, spec)
				out := string(res.Stdout) + string(res.Stderr)
				if !strings.Contains(out, "done") || !strings.Contains(out, "sh\x00-c\x00") {
					t.Fatalf("the script did not run through: exit %d, %q", res.ExitCode, out)
				}
				// The temporary directory's name is unique: any trace of the
				// host path shows.
				if leak := filepath.Base(filepath.Dir(root)); strings.Contains(out, leak) {
					t.Errorf("the sandbox sees the host path %s: %q", root, out)
				}
			})
		}
	}
}

// With Spec.DirFD bubblewrap mounts the directory PrepareDir opened, not
// whatever its path names when the command starts: a link swapped in
// afterwards is not followed, by the mount or by the disk quota's
// measure.
func TestDirFDFollowsNoSwappedPath(t *testing.T) {
	for name, s := range bubblewrapOnly(t) {
		t.Run(name, func(t *testing.T) {
			root := workRoot(t)
			f, err := s.PrepareDir(root, "p1", "s")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			outside := t.TempDir()
			if err := os.Chmod(outside, 0o777); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(root, "p1", "s")
			if err := os.Rename(dir, filepath.Join(root, "p1", "moved")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, dir); err != nil {
				t.Fatal(err)
			}
			res := run(t, s, 20*time.Second, Spec{Argv: []string{"sh", "-c", "echo hi > note"}, Dir: dir, DirFD: f, Limits: Limits{Disk: 1 << 20}})
			if res.ExitCode != 0 || res.Limit != "" {
				t.Fatalf("exit %d, limit %q, stderr %q", res.ExitCode, res.Limit, res.Stderr)
			}
			if _, err := os.Stat(filepath.Join(outside, "note")); err == nil {
				t.Error("the command wrote through the swapped-in link")
			}
			if got, err := os.ReadFile(filepath.Join(root, "p1", "moved", "note")); err != nil || string(got) != "hi\n" {
				t.Errorf("the opened directory did not get the file: %q %v", got, err)
			}
		})
	}
}
