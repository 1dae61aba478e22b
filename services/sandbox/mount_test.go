package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMounts: a mounted host directory is readable at /opt/<name> and
// cannot be written, its mount point is made in the sandbox's own root
// (nothing appears on the host), and mounts that could shadow or leave
// that place are refused before anything runs.
func TestMounts(t *testing.T) {
	code := t.TempDir()
	if err := os.WriteFile(filepath.Join(code, "server.js"), []byte("the server's code"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(code, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, s := range bubblewrapOnly(t) {
		t.Run(name, func(t *testing.T) {
			root := workRoot(t)
			dir := filepath.Join(root, "p1", "session")
			f, err := s.PrepareDir(root, "p1", "session")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			spec := Spec{Argv: []string{"sh", "-c", "cat /opt/srv/server.js; echo; echo x > /opt/srv/planted && echo WROTE; ls /opt"},
				Dir: dir, DirFD: f, Mounts: []Mount{{Host: code, At: "/opt/srv"}}}
			res := run(t, s, 20*time.Second, spec)
			out := string(res.Stdout) + string(res.Stderr)
			if !strings.Contains(out, "the server's code") || strings.Contains(out, "WROTE") {
				t.Errorf("mount: exit %d, %q", res.ExitCode, out)
			}
			if _, err := os.Stat(filepath.Join(code, "planted")); err == nil {
				t.Error("a file was written through a read-only mount")
			}
			if _, err := os.Stat("/opt/srv"); err == nil {
				t.Error("the mount point was made on the host")
			}
			for _, bad := range [][]Mount{
				{{Host: code, At: "/work"}},
				{{Host: code, At: "/opt"}},
				{{Host: code, At: "/opt/a/b"}},
				{{Host: code, At: "/opt/.."}},
				{{Host: code, At: "/usr/bin"}},
				{{Host: "relative/dir", At: "/opt/x"}},
				{{Host: code + "/../" + filepath.Base(code), At: "/opt/x"}},
				{{Host: filepath.Join(code, "server.js"), At: "/opt/x"}},
				{{Host: code, At: "/opt/x"}, {Host: code, At: "/opt/x"}},
			} {
				if _, err := s.Run(context.Background(), Spec{Argv: []string{"true"}, Dir: dir, DirFD: f, Mounts: bad}); err == nil {
					t.Errorf("mounts %v were accepted", bad)
				}
			}
		})
	}
}
