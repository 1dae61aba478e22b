package services

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"toolbelt/services/sandbox"
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

// TestFileWriteQuotaKeepsCount: file_write keeps the work directory's
// usage without walking it each time, and that count stays true: writes,
// overwrites, appends and new directories never take the host directory
// past the quota, and an overwrite that frees space lets the next write
// in.
func TestFileWriteQuotaKeepsCount(t *testing.T) {
	inv := &Invoker{dataDir: t.TempDir()}
	dir, err := inv.workDirOf(sessionKey{1, "q"})
	if err != nil {
		t.Fatal(err)
	}
	const quota = 256 << 10
	write := func(p string, n int, appending bool) error {
		c := &call{workDir: dir.path, workID: dir.id, quota: quota, usage: dir.usage,
			args: map[string]any{"path": p, "content": strings.Repeat("x", n), "append": appending}}
		_, err := fileWrite(c)
		return err
	}
	refused := 0
	for i := range 40 {
		p := fmt.Sprintf("d%d/f%d", i%3, i)
		if i%4 == 0 {
			p = "same.txt" // overwritten again and again
		}
		if err := write(p, 16<<10, i%5 == 0); err != nil {
			var te *toolError
			if !errors.As(err, &te) || te.code != CodeSandboxLimit || !strings.Contains(te.msg, "disk quota") {
				t.Fatalf("write %d: %v", i, err)
			}
			refused++
		}
		used, err := sandbox.DirUsage(dir.path)
		if err != nil {
			t.Fatal(err)
		}
		if used > quota {
			t.Fatalf("after write %d the directory holds %d bytes, quota %d", i, used, quota)
		}
	}
	if refused == 0 {
		t.Fatal("40 writes of 16 KiB never reached a 256 KiB quota")
	}
	// Freeing space (a smaller overwrite) lets a write in again.
	if err := os.RemoveAll(filepath.Join(dir.path, "d0")); err != nil {
		t.Fatal(err)
	}
	dir.usage.stale() // as a sandboxed command's end does
	if err := write("after.txt", 16<<10, false); err != nil {
		t.Fatalf("a write after freeing space: %v", err)
	}
}
