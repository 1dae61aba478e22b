package services

import (
	"sync"
	"time"
)

// batcher runs one goroutine that takes queued items and hands them to
// write in batches, so request paths enqueue and return. Both record
// writers (selections, calls) stand on it; they keep what is not written
// yet in memory for readers.
type batcher[T any] struct {
	write func([]T)
	queue chan T
	syncs chan chan struct{}
	done  chan struct{}
	once  sync.Once
}

// Batch limits: items waiting, and items per write.
const (
	batchQueue = 4096
	batchSize  = 256
	// batchLinger is how long a write waits for more items.
	batchLinger = 2 * time.Millisecond
)

// newBatcher starts the writer. When every > 0, tick also runs at start
// and then at that interval on the writer goroutine (housekeeping such as
// pruning old rows).
func newBatcher[T any](write func([]T), every time.Duration, tick func()) *batcher[T] {
	b := &batcher[T]{write: write, queue: make(chan T, batchQueue), syncs: make(chan chan struct{}), done: make(chan struct{})}
	go b.run(every, tick)
	return b
}

// put queues an item; false means the queue is full and the caller must
// write the item itself.
func (b *batcher[T]) put(item T) bool {
	select {
	case b.queue <- item:
		return true
	default:
		return false
	}
}

func (b *batcher[T]) run(every time.Duration, tick func()) {
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
		case first, ok := <-b.queue:
			if !ok {
				return
			}
			b.flush(first)
		case ack := <-b.syncs:
			b.drain()
			close(ack)
		case <-ticks:
			tick()
		}
	}
}

// drain writes everything queued now.
func (b *batcher[T]) drain() {
	for {
		select {
		case item, ok := <-b.queue:
			if !ok {
				return
			}
			b.flush(item)
		default:
			return
		}
	}
}

// flush writes first and whatever else is queued, up to batchSize. It
// lingers up to batchLinger for more items, so a busy server writes a few
// large batches instead of many single rows (each write costs the same
// fixed price in SQLite).
func (b *batcher[T]) flush(first T) {
	batch := []T{first}
	linger := time.NewTimer(batchLinger)
	defer linger.Stop()
	for len(batch) < batchSize {
		select {
		case item, ok := <-b.queue:
			if !ok {
				b.write(batch)
				return
			}
			batch = append(batch, item)
		case <-linger.C:
			b.write(batch)
			return
		}
	}
	b.write(batch)
}

// sync waits until every item queued so far is written.
func (b *batcher[T]) sync() {
	ack := make(chan struct{})
	select {
	case b.syncs <- ack:
		<-ack
	case <-b.done:
	}
}

// close writes what is queued and stops the writer.
func (b *batcher[T]) close() {
	b.once.Do(func() { close(b.queue) })
	<-b.done
}
