package services

import (
	"context"
	"log/slog"
	"sync"

	"toolbelt/models"
)

// callRecorder writes call records off the call path, in batches, so a
// call answers without waiting for the database. Records not yet written
// are served from memory; Sync waits until everything queued is written
// (listings use it so they never miss a call just made).
type callRecorder struct {
	store *models.Store
	log   *slog.Logger
	// prepare finishes a record before anyone reads or stores it (the
	// invoker redacts the arguments there, off the call path).
	prepare func(*models.Call)

	mu      sync.Mutex
	pending map[string]*models.Call
	queue   chan *models.Call
	syncs   chan chan struct{}
	done    chan struct{}
	once    sync.Once
}

func newCallRecorder(store *models.Store, prepare func(*models.Call), log *slog.Logger) *callRecorder {
	r := &callRecorder{store: store, log: log, prepare: prepare, pending: map[string]*models.Call{},
		queue: make(chan *models.Call, 4096), syncs: make(chan chan struct{}), done: make(chan struct{})}
	go r.run()
	return r
}

// save queues a record; a full queue writes at once.
func (r *callRecorder) save(ctx context.Context, c *models.Call) error {
	r.mu.Lock()
	r.pending[c.ID] = c
	r.mu.Unlock()
	select {
	case r.queue <- c:
		return nil
	default:
		r.finish(c)
		r.mu.Lock()
		cp := *c
		r.mu.Unlock()
		err := r.store.SaveCalls(ctx, []*models.Call{&cp})
		r.written([]*models.Call{c})
		return err
	}
}

// finish prepares a record once, under the lock that guards pending ones.
func (r *callRecorder) finish(c *models.Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !c.Prepared {
		r.prepare(c)
		c.Prepared = true
	}
}

func (r *callRecorder) run() {
	defer close(r.done)
	for {
		select {
		case c, ok := <-r.queue:
			if !ok {
				return
			}
			r.flush(c)
		case ack := <-r.syncs:
			r.drain()
			close(ack)
		}
	}
}

// drain writes everything queued now.
func (r *callRecorder) drain() {
	for {
		select {
		case c, ok := <-r.queue:
			if !ok {
				return
			}
			r.flush(c)
		default:
			return
		}
	}
}

func (r *callRecorder) flush(first *models.Call) {
	batch := []*models.Call{first}
drain:
	for len(batch) < 256 {
		select {
		case c, ok := <-r.queue:
			if !ok {
				break drain
			}
			batch = append(batch, c)
		default:
			break drain
		}
	}
	// gorm writes into what it saves: it gets copies, so the pending
	// records readers copy are never touched.
	copies := make([]*models.Call, len(batch))
	for i, c := range batch {
		r.finish(c)
		r.mu.Lock()
		cp := *c
		r.mu.Unlock()
		copies[i] = &cp
	}
	if err := r.store.SaveCalls(context.Background(), copies); err != nil {
		r.log.Error("record calls", "err", err, "count", len(batch))
	}
	r.written(batch)
}

func (r *callRecorder) written(batch []*models.Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range batch {
		if r.pending[c.ID] == c {
			delete(r.pending, c.ID)
		}
	}
}

// byID returns a record, pending or written.
func (r *callRecorder) byID(ctx context.Context, id string) (*models.Call, error) {
	r.mu.Lock()
	c, ok := r.pending[id]
	r.mu.Unlock()
	if ok {
		r.finish(c)
		r.mu.Lock()
		cp := *c
		r.mu.Unlock()
		return &cp, nil
	}
	return r.store.CallByID(ctx, id)
}

// sync waits until every record queued so far is written.
func (r *callRecorder) sync() {
	ack := make(chan struct{})
	select {
	case r.syncs <- ack:
		<-ack
	case <-r.done:
	}
}

// close writes what is queued and stops the writer.
func (r *callRecorder) close() {
	r.once.Do(func() { close(r.queue) })
	<-r.done
}
