package models

import (
	"context"
	"sync"
	"time"
)

// Batcher runs one goroutine that takes queued items and hands them to
// write in batches. Both record writers (selections, calls) stand on it;
// they keep what is not written yet in memory for readers.
//
// Queuing an item does not wait for the write: the request path goes on.
// Whoever must acknowledge the item (an HTTP answer) waits on its ack
// channel before answering, so what it acknowledges survives a crash.
// Waiters hurry the writer, and the items answered at the same moment
// share one write: a group commit.
type Batcher[T any] struct {
	write func([]T) error
	// mu is held shared while enqueuing and exclusively to close, so
	// every item enqueued is in the queue when the writer drains it.
	mu     sync.RWMutex
	closed bool
	queue  chan batchEntry[T]
	hurry  chan struct{}
	syncs  chan chan struct{}
	quit   chan struct{} // closed by close: write what is queued and stop
	done   chan struct{}
	once   sync.Once
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

// NewBatcher starts the writer. When every > 0, tick also runs at start
// and then at that interval on the writer goroutine (housekeeping such as
// pruning old rows).
func NewBatcher[T any](write func([]T) error, every time.Duration, tick func()) *Batcher[T] {
	b := &Batcher[T]{write: write, queue: make(chan batchEntry[T], batchQueue), hurry: make(chan struct{}, 1),
		syncs: make(chan chan struct{}), quit: make(chan struct{}), done: make(chan struct{})}
	go b.run(every, tick)
	return b
}

// Enqueue queues an item and returns the channel that receives the result
// of its write. false means the queue is full or the writer stopped: the
// caller must write the item itself.
func (b *Batcher[T]) Enqueue(item T) (<-chan error, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
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

func (b *Batcher[T]) run(every time.Duration, tick func()) {
	defer close(b.done)
	var ticks <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		ticks = t.C
		tick()
	}
	for {
		select {
		case first := <-b.queue:
			b.flush(first)
		case <-b.quit:
			b.writeQueued() // nothing is enqueued any more
			return
		case ack := <-b.syncs:
			b.writeQueued()
			close(ack)
		case <-ticks:
			tick()
		}
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
func (b *Batcher[T]) flush(first batchEntry[T]) {
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
		case <-b.quit:
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
	ack := make(chan struct{})
	select {
	case b.syncs <- ack:
		<-ack
	case <-b.done:
	}
}

// Close writes what is queued and stops the writer.
func (b *Batcher[T]) Close() {
	b.once.Do(func() {
		b.mu.Lock()
		b.closed = true
		b.mu.Unlock()
		close(b.quit)
	})
	<-b.done
}
