package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `make run` starts the server with the default --data-dir ./data, a
// relative path: it must come up (as root the sandbox probe prepares the
// work directories under it).
func TestServeRelativeDataDir(t *testing.T) {
	t.Parallel() // its own server, data directory and database
	bin := buildBinary(t)
	dir := sandboxTraversable(t)
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--tools-dir", "")
	cmd.Dir = dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var seen strings.Builder
		for sc.Scan() {
			seen.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "Readiness") {
				ready <- seen.String()
				return
			}
		}
	}()
	select {
	case banner := <-ready:
		if !strings.Contains(banner, "(data in ./data, database data/toolbelt.db)") {
			t.Errorf("banner:\n%s", banner)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the server did not start with --data-dir ./data")
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "toolbelt.db")); err != nil {
		t.Fatal(err)
	}
}
