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
	batch   *batcher[*models.Call]
}

func newCallRecorder(store *models.Store, prepare func(*models.Call), log *slog.Logger) *callRecorder {
	r := &callRecorder{store: store, log: log, prepare: prepare, pending: map[string]*models.Call{}}
	r.batch = newBatcher(r.write, 0, nil)
	return r
}

// save queues a record; a full queue writes at once.
func (r *callRecorder) save(ctx context.Context, c *models.Call) error {
	r.mu.Lock()
	r.pending[c.ID] = c
	r.mu.Unlock()
	if r.batch.put(c) {
		return nil
	}
	err := r.store.SaveCalls(ctx, r.copies([]*models.Call{c}))
	r.written([]*models.Call{c})
	return err
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
func (r *callRecorder) write(batch []*models.Call) {
	if err := r.store.SaveCalls(context.Background(), r.copies(batch)); err != nil {
		r.log.Error("record calls", "err", err, "count", len(batch))
	}
	r.written(batch)
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
