package main

import (
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// "toolbelt version" names the commit it was built from and the Go
// release, as the toolchain stamped them.
func TestVersionCommand(t *testing.T) {
	bin := buildBinary(t)
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("toolbelt version: %v\n%s", err, out)
	}
	line := strings.TrimSpace(string(out))
	if !strings.HasPrefix(line, "toolbelt ") || !strings.HasSuffix(line, " "+runtime.Version()) {
		t.Fatalf("toolbelt version = %q, want \"toolbelt … %s\"", line, runtime.Version())
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Logf("not a git checkout (%v): no commit to compare", err)
		return
	}
	want := regexp.MustCompile(`^toolbelt \S+ commit ` + strings.TrimSpace(string(head)) + `(\+dirty)? \(\S+\) `)
	if !want.MatchString(line) {
		t.Fatalf("toolbelt version = %q, want the commit %s", line, head)
	}
}
