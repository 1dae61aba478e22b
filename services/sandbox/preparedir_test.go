package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

type fileState struct {
	uid, gid uint32
	mode     os.FileMode
	entries  string
}

func stateOf(t *testing.T, p string) fileState {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	var names []string
	if st.IsDir() {
		ents, _ := os.ReadDir(p)
		for _, e := range ents {
			names = append(names, e.Name())
		}
	}
	return fileState{sys.Uid, sys.Gid, st.Mode(), strings.Join(names, ",")}
}

// A link planted anywhere on the way, to /, to a directory outside the
// root or to a sibling inside it, makes PrepareDir refuse, and nothing
// outside the work directory's own path is made, chowned or chmodded.
func TestPrepareDirRefusesLinks(t *testing.T) {
	elems := []string{"tb-a", "tb-b", "tb-c"}
	for _, drop := range []bool{false, true} {
		if drop && os.Geteuid() != 0 {
			continue // only root may give a directory to the sandbox user
		}
		s := &Sandbox{drop: drop}
		for pos := range elems {
			for _, target := range []string{"slash", "outside", "sibling"} {
				t.Run(fmt.Sprintf("drop=%v/%s-at-%s", drop, target, elems[pos]), func(t *testing.T) {
					root := workRoot(t)
					outside := t.TempDir()
					if err := os.Chmod(outside, 0o750); err != nil {
						t.Fatal(err)
					}
					sibling := filepath.Join(root, "sibling")
					if err := os.Mkdir(sibling, 0o750); err != nil {
						t.Fatal(err)
					}
					dest := map[string]string{"slash": "/", "outside": outside, "sibling": sibling}[target]
					parent := root
					for _, e := range elems[:pos] {
						parent = filepath.Join(parent, e)
						if err := os.Mkdir(parent, 0o711); err != nil {
							t.Fatal(err)
						}
					}
					link := filepath.Join(parent, elems[pos])
					if err := os.Symlink(dest, link); err != nil {
						t.Fatal(err)
					}
					before := stateOf(t, dest)
					f, err := s.PrepareDir(root, elems...)
					if err == nil {
						f.Close()
						t.Fatalf("PrepareDir followed the link %s -> %s", link, dest)
					}
					if after := stateOf(t, dest); after != before {
						t.Errorf("the link's target %s changed: %+v, was %+v", dest, after, before)
					}
					if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
						t.Errorf("the link itself changed: %v %v", st, err)
					}
					for _, e := range elems[pos:] {
						if _, err := os.Lstat(filepath.Join(dest, e)); err == nil && dest != "/" {
							t.Errorf("%s was made through the link", filepath.Join(dest, e))
						}
						if _, err := os.Lstat(filepath.Join("/", e)); err == nil {
							t.Errorf("/%s was made through the link", e)
						}
					}
				})
			}
		}
	}
}

func TestPrepareDirRefusesRootLinkAndBadElements(t *testing.T) {
	base := workRoot(t)
	real := filepath.Join(base, "real")
	if err := os.Mkdir(real, 0o711); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "root")
	if err := os.Symlink(real, root); err != nil {
		t.Fatal(err)
	}
	s := &Sandbox{drop: os.Geteuid() == 0}
	if f, err := s.PrepareDir(root, "p1"); err == nil {
		f.Close()
		t.Error("a root that is a link was followed")
	}
	if _, err := os.Lstat(filepath.Join(real, "p1")); err == nil {
		t.Error("p1 was made through the root link")
	}
	for _, elems := range [][]string{nil, {""}, {"."}, {".."}, {"a/b"}, {"ok", "../x"}, {"nul\x00"}, {"/abs"}} {
		if f, err := s.PrepareDir(real, elems...); err == nil {
			f.Close()
			t.Errorf("elements %q accepted", elems)
		}
	}
	if ents, _ := os.ReadDir(real); len(ents) != 0 {
		t.Errorf("refused elements made %v", ents)
	}
}

// As root: a directory on the way owned by another user is refused (its
// owner could swap it), as is a work directory owned by neither the
// server nor the sandbox user; the work directory goes to the sandbox user
// and the way to it becomes traversable by the sandbox's group only.
func TestPrepareDirOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	s := &Sandbox{drop: true}
	root := workRoot(t)
	if err := os.Mkdir(filepath.Join(root, "p1"), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := s.PrepareDir(root, "p1", "s")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if st := stateOf(t, filepath.Join(root, "p1", "s")); st.uid != SandboxUID || st.gid != SandboxGID || st.mode.Perm() != 0o700 {
		t.Errorf("work directory %+v", st)
	}
	// The way to it: the server's, traversable by the sandbox's group
	// only (bubblewrap resolves even a descriptor's path).
	if st := stateOf(t, filepath.Join(root, "p1")); st.uid != 0 || st.gid != SandboxGID || st.mode.Perm() != 0o710 {
		t.Errorf("the way to it %+v", st)
	}
	// Prepared again: still fine (the sandbox user owns it now).
	if f, err = s.PrepareDir(root, "p1", "s"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chown(filepath.Join(root, "p1"), 1234, 1234); err != nil {
		t.Fatal(err)
	}
	if f, err = s.PrepareDir(root, "p1", "s"); err == nil {
		f.Close()
		t.Error("a directory on the way owned by uid 1234 was accepted")
	}
	if err := os.Mkdir(filepath.Join(root, "other"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(root, "other"), 1234, 1234); err != nil {
		t.Fatal(err)
	}
	if f, err = s.PrepareDir(root, "other"); err == nil {
		f.Close()
		t.Error("a work directory owned by uid 1234 was accepted")
	}
	if st := stateOf(t, filepath.Join(root, "other")); st.uid != 1234 {
		t.Errorf("it was chowned: %+v", st)
	}
}
