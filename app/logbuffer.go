package app

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// logBuffer gathers the server's log lines and writes them in batches: a
// busy server logs a line per request (the access line), and one
// write(2) each was a measurable share of a cached call. Lines reach the
// output within logFlushAfter, at once when logFlushBytes are waiting,
// and at once with any warning or error (flushOnWarn), so what explains
// a failure is never held back. Close flushes what is left.
//
// The log is not the record of calls: that is the history and its
// journal (docs/operations.md, Durability). A SIGKILL loses at most the
// last logFlushAfter of informational lines.
type logBuffer struct {
	mu    sync.Mutex
	out   io.Writer
	buf   []byte
	timer *time.Timer // armed while buf holds lines
	armed bool
}

const (
	logFlushAfter = 100 * time.Millisecond
	logFlushBytes = 32 << 10
)

func newLogBuffer(out io.Writer) *logBuffer {
	b := &logBuffer{out: out, buf: make([]byte, 0, logFlushBytes+4<<10)}
	b.timer = time.AfterFunc(time.Hour, b.Flush)
	b.timer.Stop()
	return b
}

// Write takes one line (slog writes each record with one Write); it never
// fails: an error of the output shows at the flush and is dropped, as
// slog drops it.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	switch {
	case len(b.buf) >= logFlushBytes:
		b.flushLocked()
	case !b.armed:
		b.armed = true
		b.timer.Reset(logFlushAfter)
	}
	return len(p), nil
}

// Flush writes what is waiting.
func (b *logBuffer) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

func (b *logBuffer) flushLocked() {
	if b.armed {
		b.timer.Stop()
		b.armed = false
	}
	if len(b.buf) == 0 {
		return
	}
	_, _ = b.out.Write(b.buf)
	b.buf = b.buf[:0]
}

// flushOnWarn is a log handler whose warnings and errors reach the output
// at once, with every line logged before them.
type flushOnWarn struct {
	slog.Handler
	out *logBuffer
}

func (h flushOnWarn) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		h.out.Flush()
	}
	return err
}

func (h flushOnWarn) WithAttrs(attrs []slog.Attr) slog.Handler {
	return flushOnWarn{h.Handler.WithAttrs(attrs), h.out}
}

func (h flushOnWarn) WithGroup(name string) slog.Handler {
	return flushOnWarn{h.Handler.WithGroup(name), h.out}
}
