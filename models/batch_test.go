package models

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolbelt/internal/poll"
)

// A sync waits for what was queued before it, not for what keeps coming:
// under steady load it returns, with the earlier items written.
func TestBatcherSyncUnderLoad(t *testing.T) {
	var written sync.Map
	var batches atomic.Int64
	b := NewBatcher(func(items []int) error {
		batches.Add(1)
		time.Sleep(time.Millisecond)
		for _, it := range items {
			written.Store(it, true)
		}
		return nil
	})
	runBatcher(t, b)
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
	poll.True(t, 10*time.Second, "the stream under way (two batches written)", func() bool { return batches.Load() >= 2 })
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

// runBatcher runs b's writer until the test ends.
func runBatcher[T any](t *testing.T, b *Batcher[T]) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	for !b.Running() {
		runtime.Gosched()
	}
}

// Without its Run the batcher takes nothing (the caller writes); while it
// runs it takes items; when Run ends it has written every item it took,
// and takes none again.
func TestBatcherTakesItemsWhileItRuns(t *testing.T) {
	var mu sync.Mutex
	var written []int
	b := NewBatcher(func(items []int) error {
		mu.Lock()
		defer mu.Unlock()
		written = append(written, items...)
		return nil
	})
	if _, ok := b.Enqueue(1); ok {
		t.Fatal("a batcher that never ran took an item")
	}
	b.Sync() // returns: nothing queued
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	var ack <-chan error
	for ok := false; !ok; ack, ok = b.Enqueue(2) {
		runtime.Gosched()
	}
	if err := b.Run(ctx); err == nil {
		t.Error("a second Run ran")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-ack; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(written) == 0 || written[len(written)-1] != 2 {
		t.Errorf("written %v, want the item taken last", written)
	}
	mu.Unlock()
	if _, ok := b.Enqueue(3); ok {
		t.Error("a batcher whose Run ended took an item")
	}
	b.Sync()
}
