package testlog

import (
	"strings"
	"sync"
	"testing"
)

// Writers racing a reader: every write lands whole (run with -race).
func TestBufferConcurrent(t *testing.T) {
	t.Parallel()
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("line\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := strings.Count(b.String(), "line\n"); got != 400 {
		t.Fatalf("%d lines, want 400", got)
	}
}
