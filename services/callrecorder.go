package services

import (
	"context"
	"log/slog"
	"sync"

	"toolbelt/models"
)

// callRecorder writes call records in batches, off the call path (the
// redaction of the arguments happens on the writer too). The HTTP answer
// of a call waits until its record is committed (Invoker.Committed), so no
// acknowledged call is lost to a crash; the calls answered at the same
// moment share one write (group commit). Records being written are read
// from memory once written; sync waits until everything queued is
// written (listings use it).
type callRecorder struct {
	store *models.Store
	log   *slog.Logger
	// prepare finishes a record before anyone reads or stores it (the
	// invoker redacts the arguments there, off the call path).
	prepare func(*models.Call)

	mu      sync.Mutex
	pending map[string]*models.Call
	batch   *batcher[*models.Call]
}

func newCallRecorder(store *models.Store, prepare func(*models.Call), log *slog.Logger) *callRecorder {
	r := &callRecorder{store: store, log: log, prepare: prepare, pending: map[string]*models.Call{}}
	r.batch = newBatcher(r.write, 0, nil)
	return r
}

// save queues a record and returns the channel that receives the result
// of its write (wait on it before acknowledging the call). A full queue
// writes at once.
func (r *callRecorder) save(ctx context.Context, c *models.Call) <-chan error {
	r.mu.Lock()
	r.pending[c.ID] = c
	r.mu.Unlock()
	if ack, ok := r.batch.enqueue(c); ok {
		return ack
	}
	err := r.store.SaveCalls(ctx, r.copies([]*models.Call{c}))
	r.written([]*models.Call{c})
	ack := make(chan error, 1)
	ack <- err
	return ack
}

// saveNow writes a record and returns once it is committed.
func (r *callRecorder) saveNow(ctx context.Context, c *models.Call) error {
	return r.wait(ctx, r.save(ctx, c))
}

// wait returns once the record of ack is committed (nil ack: nothing to
// wait for).
func (r *callRecorder) wait(ctx context.Context, ack <-chan error) error {
	if ack == nil {
		return nil
	}
	return r.batch.wait(ctx, ack)
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

// write stores a batch with one statement.
func (r *callRecorder) write(batch []*models.Call) error {
	err := r.store.SaveCalls(context.Background(), r.copies(batch))
	if err != nil {
		r.log.Error("record calls", "err", err, "count", len(batch))
	}
	r.written(batch)
	return err
}

// copies prepares records and returns copies of them to save: gorm writes
// into what it saves, and readers copy the pending records.
func (r *callRecorder) copies(batch []*models.Call) []*models.Call {
	out := make([]*models.Call, len(batch))
	for i, c := range batch {
		r.finish(c)
		r.mu.Lock()
		cp := *c
		r.mu.Unlock()
		out[i] = &cp
	}
	return out
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
		// Being written: answer once it is, so nothing read here can be
		// lost to a crash.
		r.batch.sync()
		r.finish(c)
		r.mu.Lock()
		cp := *c
		r.mu.Unlock()
		return &cp, nil
	}
	return r.store.CallByID(ctx, id)
}

// sync waits until every record queued so far is written.
func (r *callRecorder) sync() { r.batch.sync() }

// close writes what is queued and stops the writer.
func (r *callRecorder) close() { r.batch.close() }
