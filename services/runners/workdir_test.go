package runners

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"toolbelt/models"
	"toolbelt/services/sandbox"
)

// testWorkDir makes a work directory as the invoker does (PrepareDir is
// tested against planted links in the sandbox package).
func testWorkDir(t *testing.T) WorkDir {
	t.Helper()
	dir, err := (&Table{dataDir: t.TempDir()}).WorkDir(1, "s")
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
	if err := os.Symlink(outside, filepath.Join(dir.Path, "screenshots")); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "shot.png")
	if err := os.WriteFile(src, []byte("\x89PNG"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Call{ID: "c1", Dir: withDir(dir, 0, &[2]int{os.Geteuid(), os.Getegid()})}
	if err := saveScreenshot(c, src, "screenshots/c1.png"); err == nil {
		t.Fatal("the screenshot was saved through a link")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("written outside: %v", entries)
	}
	// A real screenshots/ directory works.
	os.Remove(filepath.Join(dir.Path, "screenshots"))
	if err := saveScreenshot(c, src, "screenshots/c1.png"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir.Path, "screenshots", "c1.png")); string(b) != "\x89PNG" {
		t.Errorf("screenshot content %q", b)
	}
}

// TestOpenRootChecksIdentity: a work directory replaced after it was made
// (renamed away and another put in its place) is refused.
func TestOpenRootChecksIdentity(t *testing.T) {
	dir := testWorkDir(t)
	c := &Call{Dir: dir}
	r, err := openRoot(c)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := os.Rename(dir.Path, dir.Path+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir.Path, 0o700); err != nil {
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
	dir, err := (&Table{dataDir: t.TempDir()}).WorkDir(1, "q")
	if err != nil {
		t.Fatal(err)
	}
	const quota = 256 << 10
	write := func(p string, n int, appending bool) error {
		c := &Call{Dir: withDir(dir, quota, nil), Args: map[string]any{"path": p, "content": strings.Repeat("x", n), "append": appending}}
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
			var te *Error
			if !errors.As(err, &te) || te.Code != models.CodeSandboxLimit || !strings.Contains(te.Message, "disk quota") {
				t.Fatalf("write %d: %v", i, err)
			}
			refused++
		}
		used, err := sandbox.DirUsage(dir.Path)
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
	if err := os.RemoveAll(filepath.Join(dir.Path, "d0")); err != nil {
		t.Fatal(err)
	}
	dir.usage.stale() // as a sandboxed command's end does
	if err := write("after.txt", 16<<10, false); err != nil {
		t.Fatalf("a write after freeing space: %v", err)
	}
}

// TestFileWriteEdges: a backslash is a separator for every step of
// file_write (it made a directory "a" and a file named "a\b.txt" it then
// reported missing); replacing a sparse file frees its blocks, not its
// size, in the quota's count; a path deeper than the measuring walk's
// bound is refused.
func TestFileWriteEdges(t *testing.T) {
	dir, err := (&Table{dataDir: t.TempDir()}).WorkDir(1, "e")
	if err != nil {
		t.Fatal(err)
	}
	c := func(args map[string]any, quota int64) *Call {
		return &Call{Dir: withDir(dir, quota, nil), Args: args}
	}
	if _, err := fileWrite(c(map[string]any{"path": `a\b.txt`, "content": "hello"}, 0)); err != nil {
		t.Fatalf("backslash write: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir.Path, "a", "b.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("a/b.txt on the host: %q %v", b, err)
	}
	if out, err := fileRead(c(map[string]any{"path": `a\b.txt`}, 0)); err != nil || out.(map[string]any)["content"] != "hello" {
		t.Fatalf("backslash read: %v %v", out, err)
	}
	// Sparse files of 1 MiB each, a 256 KiB quota: replacing them must not
	// count their size as freed.
	for i := range 8 {
		f, err := os.Create(filepath.Join(dir.Path, fmt.Sprintf("sparse%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(1 << 20)
		f.Close()
	}
	dir.usage.stale()
	const quota = 256 << 10
	for i := range 8 {
		_, _ = fileWrite(c(map[string]any{"path": fmt.Sprintf("sparse%d", i), "content": strings.Repeat("A", 64<<10)}, quota))
	}
	if used, err := sandbox.DirUsage(dir.Path); err != nil || used > quota {
		t.Errorf("replacing sparse files took the directory to %d bytes, quota %d (%v)", used, quota, err)
	}
	deep := strings.Repeat("d/", maxPathDepth) + "f"
	if _, err := fileWrite(c(map[string]any{"path": deep, "content": "x"}, 0)); err == nil || !strings.Contains(err.Error(), "directories deep") {
		t.Errorf("a %d-deep path: %v", maxPathDepth, err)
	}
}

// withDir is dir with another quota and owner, as a call might see it.
func withDir(dir WorkDir, quota int64, owner *[2]int) WorkDir {
	dir.Quota, dir.Owner = quota, owner
	return dir
}
