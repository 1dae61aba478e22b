package models

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Batcher hands queued items to write in batches, on the goroutine of
// its Run. Both record writers (selections, calls) stand on it; they keep
// what is not written yet in memory for readers.
//
// Queuing an item does not wait for the write: the request path goes on.
// Whoever must acknowledge the item (an HTTP answer) waits on its ack
// channel before answering, so what it acknowledges survives a crash.
// Waiters hurry the writer, and the items answered at the same moment
// share one write: a group commit. While Run is not running (before it
// starts, after it ends, or in a tool that never runs it), Enqueue
// refuses and the caller writes the item itself.
type Batcher[T any] struct {
	write func([]T) error
	// mu is held shared while enqueuing and exclusively to start or stop
	// the writer, so every item enqueued is in the queue when the writer
	// drains it. running says whether Run takes items; done is closed
	// when the last Run has written what was queued (nil before any).
	mu      sync.RWMutex
	running bool
	done    chan struct{}
	queue   chan batchEntry[T]
	hurry   chan struct{}
	syncs   chan chan struct{}
}

type batchEntry[T any] struct {
	item T
	ack  chan error
}

// Batch limits: items waiting, and items per write.
const (
	batchQueue = 4096
	batchSize  = 256
	// batchLinger is how long a write nobody waits for waits for more items.
	batchLinger = 10 * time.Millisecond
)

// NewBatcher returns a batcher over write. It starts nothing: items are
// queued while Run runs.
func NewBatcher[T any](write func([]T) error) *Batcher[T] {
	return &Batcher[T]{write: write, queue: make(chan batchEntry[T], batchQueue), hurry: make(chan struct{}, 1),
		syncs: make(chan chan struct{})}
}

// errRunning is what a second Run of a batcher returns while the first
// runs.
var errRunning = errors.New("the batcher runs already")

// Run writes what is queued until ctx ends, then writes what is left and
// returns; from then on Enqueue refuses.
func (b *Batcher[T]) Run(ctx context.Context) error {
	b.mu.Lock()
	if b.running {
		b.mu.Unlock()
		return errRunning
	}
	b.running = true
	done := make(chan struct{})
	b.done = done
	b.mu.Unlock()
	defer close(done)
	for {
		select {
		case first := <-b.queue:
			b.flush(ctx, first)
		case ack := <-b.syncs:
			b.writeQueued()
			close(ack)
		case <-ctx.Done():
			b.mu.Lock()
			b.running = false // nothing is enqueued any more
			b.mu.Unlock()
			b.writeQueued()
			return nil
		}
	}
}

// Running reports whether Run takes items.
func (b *Batcher[T]) Running() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.running
}

// Enqueue queues an item and returns the channel that receives the result
// of its write. false means the queue is full or the writer stopped: the
// caller must write the item itself.
func (b *Batcher[T]) Enqueue(item T) (<-chan error, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if !b.running {
		return nil, false
	}
	ack := make(chan error, 1)
	select {
	case b.queue <- batchEntry[T]{item: item, ack: ack}:
		return ack, true
	default:
		return nil, false
	}
}

// Wait returns once the item of ack is written (with the write's error),
// hurrying the writer. A cancelled ctx stops the Wait, not the write.
func (b *Batcher[T]) Wait(ctx context.Context, ack <-chan error) error {
	select {
	case err := <-ack:
		return err
	default:
	}
	select {
	case b.hurry <- struct{}{}:
	default:
	}
	select {
	case err := <-ack:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeQueued writes the items queued now, at once: a sync waits for
// what was queued before it, not for what keeps coming.
func (b *Batcher[T]) writeQueued() {
	for n := len(b.queue); n > 0; {
		batch := make([]batchEntry[T], min(n, batchSize))
		for i := range batch {
			batch[i] = <-b.queue
		}
		n -= len(batch)
		b.writeBatch(batch)
	}
}

// flush writes first and whatever else is queued, up to batchSize. It
// lingers up to batchLinger for more items, so a busy server writes a few
// large batches instead of many single rows (each write costs the same
// fixed price in SQLite), unless someone waits: then it takes what is
// queued already and writes.
func (b *Batcher[T]) flush(ctx context.Context, first batchEntry[T]) {
	batch := []batchEntry[T]{first}
	linger := time.NewTimer(batchLinger)
	defer linger.Stop()
	for hurried := false; len(batch) < batchSize; {
		if hurried {
			select {
			case e := <-b.queue:
				batch = append(batch, e)
				continue
			default:
			}
			break
		}
		select {
		case e := <-b.queue:
			batch = append(batch, e)
			continue
		case <-ctx.Done():
			hurried = true
			continue
		case <-b.hurry:
			hurried = true
			continue
		case <-linger.C:
		}
		break
	}
	b.writeBatch(batch)
}

func (b *Batcher[T]) writeBatch(batch []batchEntry[T]) {
	items := make([]T, len(batch))
	for i, e := range batch {
		items[i] = e.item
	}
	err := b.write(items)
	for _, e := range batch {
		e.ack <- err
	}
}

// Sync waits until every item queued so far is written.
func (b *Batcher[T]) Sync() {
	b.mu.RLock()
	done := b.done
	b.mu.RUnlock()
	if done == nil {
		return // never ran: nothing was queued
	}
	ack := make(chan struct{})
	select {
	case b.syncs <- ack:
		<-ack
	case <-done:
	}
}
