package services

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestMakeWorkDirRefusesLinks: a link (or a file) planted where a
// principal's or a session's directory goes is refused, never followed:
// nothing is made or chowned through it.
func TestMakeWorkDirRefusesLinks(t *testing.T) {
	root := filepath.Join(t.TempDir(), "sessions")
	outside := t.TempDir()
	if _, err := makeWorkDir(root, nil, "p1", "s"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		plant func() error
		elems []string
	}{
		{"principal link to outside", func() error { return os.Symlink(outside, filepath.Join(root, "p2")) }, []string{"p2", "s"}},
		{"principal link to a sibling", func() error { return os.Symlink("p1", filepath.Join(root, "p3")) }, []string{"p3", "s"}},
		{"principal link to /", func() error { return os.Symlink("/", filepath.Join(root, "p4")) }, []string{"p4", "etc"}},
		{"session link to outside", func() error { return os.Symlink(outside, filepath.Join(root, "p1", "t")) }, []string{"p1", "t"}},
		{"session link to the root", func() error { return os.Symlink("../..", filepath.Join(root, "p1", "u")) }, []string{"p1", "u"}},
		{"session is a file", func() error { return os.WriteFile(filepath.Join(root, "p1", "f"), nil, 0o600) }, []string{"p1", "f"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.plant(); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadDir(outside)
			_, err := makeWorkDir(root, &[2]int{os.Geteuid(), os.Getegid()}, tc.elems...)
			if !errors.Is(err, errPlanted) {
				t.Fatalf("err = %v, want a refusal", err)
			}
			if after, _ := os.ReadDir(outside); len(after) != len(before) {
				t.Errorf("something was made outside: %v", after)
			}
		})
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a\x00"} {
		if _, err := makeWorkDir(root, nil, "p1", bad); err == nil {
			t.Errorf("element %q accepted", bad)
		}
	}
}

// TestScreenshotRefusesPlantedLink: screenshots/ planted as a link by a
// sandboxed program does not send the PNG (or a chown) outside.
func TestScreenshotRefusesPlantedLink(t *testing.T) {
	root := filepath.Join(t.TempDir(), "sessions")
	dir, err := makeWorkDir(root, nil, "p1", "s")
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir.path, "screenshots")); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "shot.png")
	if err := os.WriteFile(src, []byte("\x89PNG"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &call{id: "c1", workDir: dir.path, workID: dir.id, owner: &[2]int{os.Geteuid(), os.Getegid()}}
	if err := saveScreenshot(c, src, "screenshots/c1.png"); err == nil {
		t.Fatal("the screenshot was saved through a link")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("written outside: %v", entries)
	}
	// A real screenshots/ directory works.
	os.Remove(filepath.Join(dir.path, "screenshots"))
	if err := saveScreenshot(c, src, "screenshots/c1.png"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir.path, "screenshots", "c1.png")); string(b) != "\x89PNG" {
		t.Errorf("screenshot content %q", b)
	}
}

// TestOpenRootChecksIdentity: a work directory replaced after it was made
// (renamed away and another put in its place) is refused.
func TestOpenRootChecksIdentity(t *testing.T) {
	root := filepath.Join(t.TempDir(), "sessions")
	dir, err := makeWorkDir(root, nil, "p1", "s")
	if err != nil {
		t.Fatal(err)
	}
	c := &call{workDir: dir.path, workID: dir.id}
	r, err := openRoot(c)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := os.Rename(dir.path, dir.path+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir.path, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := openRoot(c); !errors.Is(err, errPlanted) {
		t.Errorf("a replaced work directory: %v", err)
	}
}
