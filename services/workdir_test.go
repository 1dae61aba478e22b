package services

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// testWorkDir makes a work directory as the invoker does (PrepareDir is
// tested against planted links in the sandbox package).
func testWorkDir(t *testing.T) workDir {
	t.Helper()
	inv := &Invoker{dataDir: t.TempDir()}
	dir, err := inv.workDirOf(sessionKey{1, "s"})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestScreenshotRefusesPlantedLink: screenshots/ planted as a link by a
// sandboxed program does not send the PNG (or a chown) outside.
func TestScreenshotRefusesPlantedLink(t *testing.T) {
	dir := testWorkDir(t)
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
	dir := testWorkDir(t)
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
