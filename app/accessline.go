package app

import (
	"io"
	"strconv"
	"sync"
	"time"

	"toolbelt/models"
	"toolbelt/web"
)

// accessLine writes the access line of a request by hand, byte for byte
// the line the JSON log handler makes of web.RequestLine.Record (with the
// logger's "instance" and durations with their unit): a line per request
// is the busiest in the log, and the handler's generic work per attribute
// cost several times what appending the known fields does
// (BenchmarkAccessLine). FuzzAccessLine compares the two.
type accessLine struct {
	out  io.Writer // safe for concurrent writes: the log handler writes to it too
	with []byte    // the logger's attributes as the handler writes them: `,"instance":"…"`
	bufs sync.Pool
}

func newAccessLine(out io.Writer, instance string) *accessLine {
	with := models.AppendJSONString([]byte(`,"instance":`), instance)
	return &accessLine{out: out, with: with, bufs: sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}}
}

// write writes l's line; false (nothing written) for a time RFC 3339
// cannot hold, which the handler reports its own way.
func (a *accessLine) write(l web.RequestLine) bool {
	if y := l.End.Year(); y < 0 || y >= 10000 {
		return false
	}
	bp := a.bufs.Get().(*[]byte)
	b := append((*bp)[:0], `{"time":"`...)
	b = l.End.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"INFO","msg":"request"`...)
	b = append(b, a.with...)
	b = appendLogField(b, `,"request_id":`, l.RequestID)
	b = appendLogField(b, `,"method":`, l.Method)
	b = appendLogField(b, `,"path":`, l.Path)
	b = appendLogField(b, `,"route":`, l.Route)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(l.Status), 10)
	b = appendLogField(b, `,"duration":`, l.Took.String())
	b = appendLogField(b, `,"principal":`, l.Actor)
	b = append(b, "}\n"...)
	_, _ = a.out.Write(b)
	*bp = b
	a.bufs.Put(bp)
	return true
}

func appendLogField(b []byte, key, value string) []byte {
	return models.AppendJSONString(append(b, key...), value)
}

// lockedWriter serializes the writes of the log handler and accessLine
// to an output that may not take concurrent ones.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
