package app

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"toolbelt/internal/poll"
)

// syncWriter is an output the buffer's timer and the test share.
type syncWriter struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestLogBufferKeepsEveryLine: informational lines arrive together and
// in order within logFlushAfter, a warning at once with the lines
// before it, and Flush leaves nothing behind.
func TestLogBufferKeepsEveryLine(t *testing.T) {
	out := &syncWriter{}
	buf := newLogBuffer(out)
	log := slog.New(flushOnWarn{slog.NewJSONHandler(buf, nil), buf}).With("instance", "i")

	log.Info("one")
	log.Info("two")
	if got := out.String(); got != "" {
		t.Fatalf("info lines written at once: %q", got)
	}
	log.Warn("three")
	if got := out.String(); strings.Count(got, "\n") != 3 || !strings.Contains(got, `"msg":"one"`) ||
		strings.Index(got, `"one"`) > strings.Index(got, `"two"`) || strings.Index(got, `"two"`) > strings.Index(got, `"three"`) {
		t.Fatalf("after a warning: %q", got)
	}
	if out.writes != 1 {
		t.Fatalf("%d writes for three lines, want 1", out.writes)
	}

	log.Info("four")
	poll.True(t, 10*time.Second, "an info line written", func() bool { return strings.Contains(out.String(), `"four"`) })

	log.Info("five")
	buf.Flush()
	if !strings.Contains(out.String(), `"five"`) {
		t.Fatal("Flush left a line behind")
	}
}

// TestLogBufferWritesWhenFull: a full buffer is written without waiting.
func TestLogBufferWritesWhenFull(t *testing.T) {
	out := &syncWriter{}
	buf := newLogBuffer(out)
	line := []byte(strings.Repeat("x", 1023) + "\n")
	for range logFlushBytes / len(line) {
		_, _ = buf.Write(line)
	}
	if got := len(out.String()); got != logFlushBytes {
		t.Fatalf("%d bytes written, want %d", got, logFlushBytes)
	}
	buf.Flush()
}
