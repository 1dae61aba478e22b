package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"toolbelt/internal/poll"
	"toolbelt/internal/testlog"
)

// Logs are JSON for collectors and text for people; a duration keeps its
// unit either way.
func TestLoggerFormats(t *testing.T) {
	for _, c := range []struct{ format, want string }{
		{"json", `"took":"1.5ms"`},
		{"auto", `"took":"1.5ms"`}, // a buffer is not a terminal
		{"text", "took=1.5ms"},
	} {
		var b bytes.Buffer
		cfg := Config{LogLevel: "info", LogFormat: c.format}
		format, err := logFormat(cfg, &b)
		if err != nil {
			t.Fatal(err)
		}
		log, err := newLogger(cfg, format, &b)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("done", "took", 1500*time.Microsecond)
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("%s: %q lacks %s", c.format, b.String(), c.want)
		}
		if c.format != "text" && !json.Valid(b.Bytes()) {
			t.Errorf("%s: not JSON: %q", c.format, b.String())
		}
	}
	if _, err := logFormat(Config{LogLevel: "info", LogFormat: "yaml"}, &bytes.Buffer{}); err == nil ||
		!strings.Contains(err.Error(), "use auto, json or text") {
		t.Errorf("log format yaml: %v", err)
	}
}

// "auto" writes text to a terminal, and JSON to a file or /dev/null (a
// character device that is no terminal).
func TestLoggerAutoOnTerminal(t *testing.T) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	file, err := os.Create(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for _, c := range []struct {
		f    *os.File
		want bool
	}{{tty, true}, {null, false}, {file, false}} {
		if got := isTerminal(c.f); got != c.want {
			t.Errorf("isTerminal(%s) = %v, want %v", c.f.Name(), got, c.want)
		}
	}
}

// Every line names its instance once: a component's logger is the app's,
// not one that adds the key again (JSON with a key twice is ambiguous).
func TestLogLinesNameTheInstanceOnce(t *testing.T) {
	var logs testlog.Buffer
	cfg := testConfig(t, t.TempDir(), "--log-level", "debug")
	a, err := New(context.Background(), cfg, Options{Stdout: io.Discard, LogOutput: &logs})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	poll.Until(t, 30*time.Second, "the leader logged", func() (bool, string) {
		return strings.Contains(logs.String(), `"msg":"leading`), "the log:\n" + logs.String()
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if !strings.Contains(logs.String(), `"msg":"leading`) {
		t.Fatalf("the leader never logged; the log:\n%s", logs.String())
	}
	for _, line := range lines {
		if n := strings.Count(line, `"instance":`); n != 1 {
			t.Errorf("%d instance keys in %s", n, line)
		}
	}
}
