package poll

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestUntil checks that Until returns once the condition holds, having
// asked it again, and fails a test whose condition never holds, with
// what it last said.
func TestUntil(t *testing.T) {
	asked := 0
	Until(t, time.Second, "the third ask", func() (bool, string) { asked++; return asked == 3, "" })
	if asked != 3 {
		t.Errorf("asked %d times", asked)
	}
	ft := &fatalT{T: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		True(ft, 30*time.Millisecond, "never", func() bool { return false })
	}()
	<-done
	if ft.msg != "never: not within 30ms: still not so" {
		t.Errorf("failed with %q", ft.msg)
	}
}

// fatalT records Fatalf and ends the goroutine, as testing.T does.
type fatalT struct {
	*testing.T
	msg string
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
