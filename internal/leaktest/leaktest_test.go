package leaktest

import (
	"strings"
	"testing"
)

// A goroutine started after the snapshot is listed until it ends, unless
// ignored.
func TestStarted(t *testing.T) {
	snap := Take()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		<-stop
	}()
	started := snap.Started()
	if len(started) != 1 || !strings.Contains(started[0], "leaktest.TestStarted") {
		t.Errorf("started: %q", started)
	}
	if ignored := snap.Started("leaktest.TestStarted"); len(ignored) != 0 {
		t.Errorf("ignored yet listed: %q", ignored)
	}
	close(stop)
	<-done
}
