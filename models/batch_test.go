package models

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A sync waits for what was queued before it, not for what keeps coming:
// under steady load it returns, with the earlier items written.
func TestBatcherSyncUnderLoad(t *testing.T) {
	var written sync.Map
	b := NewBatcher(func(items []int) error {
		time.Sleep(time.Millisecond)
		for _, it := range items {
			written.Store(it, true)
		}
		return nil
	}, 0, nil)
	t.Cleanup(b.Close)
	stop := make(chan struct{})
	var next atomic.Int64
	go func() { // a steady stream, faster than the writes
		for {
			select {
			case <-stop:
				return
			default:
			}
			b.Enqueue(int(next.Add(1))) // as fast as it goes: the queue stays full
		}
	}()
	defer close(stop)
	time.Sleep(20 * time.Millisecond)
	mine := -1
	for _, ok := b.Enqueue(mine); !ok; _, ok = b.Enqueue(mine) {
		runtime.Gosched() // full: wait for room
	}
	done := make(chan struct{})
	go func() { b.Sync(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("sync did not return under steady load")
	}
	if _, ok := written.Load(mine); !ok {
		t.Fatal("sync returned before the item queued before it was written")
	}
}
