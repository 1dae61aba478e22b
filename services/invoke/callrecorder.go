package invoke

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"toolbelt/models"
)

// callRecorder writes call records in batches, off the call path (the
// redaction of the arguments happens on the writer too). Before a call is
// answered its record is made durable (Invoker.Committed): appended to the
// journal when there is one, otherwise committed with the answers of the
// same moment (group commit); so no answered call is lost to a crash.
// Records being written are read from memory; sync waits until
// everything queued is written (listings use it).
type callRecorder struct {
	store *models.Store
	log   *slog.Logger
	// prepare finishes a record before anyone reads or stores it (the
	// invoker redacts the arguments there, off the call path).
	prepare func(*models.Call)

	mu      sync.Mutex
	pending map[string]*models.Call
	batch   *models.Batcher[*models.Call]

	// journal, when set, makes answered records durable at once.
	journal *callJournal
	// leftover is a journal an earlier run left behind, replayed at
	// start though this one journals nothing (Postgres).
	leftover *callJournal
	// failed is set by a write that failed: from then on journal
	// segments are kept, for the next start to replay.
	failed atomic.Bool
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// journalEvery is how often journal segments are retired.
const journalEvery = time.Second

func newCallRecorder(store *models.Store, prepare func(*models.Call), journal *callJournal, log *slog.Logger) *callRecorder {
	r := &callRecorder{store: store, log: log, prepare: prepare, pending: map[string]*models.Call{}, journal: journal,
		stop: make(chan struct{}), done: make(chan struct{})}
	r.batch = models.NewBatcher(r.write, 0, nil)
	go r.retire()
	return r
}

// durable returns once the record c (queued with ack) survives a crash:
// written already, appended to the journal, or else committed.
func (r *callRecorder) durable(ctx context.Context, c *models.Call, ack <-chan error) error {
	select {
	case err := <-ack:
		return err
	default:
	}
	if r.journal == nil || c == nil {
		return r.wait(ctx, ack)
	}
	cp := r.snapshot(c) // journaled arguments are redacted too
	if err := r.journal.append(&cp); errors.Is(err, errJournalClosed) {
		return r.wait(ctx, ack) // shutting down: the writer drains the queue
	} else if err != nil {
		return err
	}
	return nil
}

// retire deletes the journal segments whose records are all written:
// every second it closes the current segment and waits until everything
// queued so far is written (each journaled record was queued before it was
// journaled).
func (r *callRecorder) retire() {
	defer close(r.done)
	if r.journal == nil {
		return
	}
	t := time.NewTicker(journalEvery)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		segs, err := r.journal.rotate()
		if err != nil {
			r.log.Error("rotate call journal", "err", err)
			continue
		}
		if len(segs) == 0 {
			continue
		}
		r.batch.Sync()
		if !r.failed.Load() {
			r.journal.remove(segs)
		}
	}
}

// save queues a record and returns the channel that receives the result
// of its write (wait on it before acknowledging the call). A full queue
// writes at once.
func (r *callRecorder) save(ctx context.Context, c *models.Call) <-chan error {
	r.mu.Lock()
	r.pending[c.ID] = c
	r.mu.Unlock()
	if ack, ok := r.batch.Enqueue(c); ok {
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
	return r.batch.Wait(ctx, ack)
}

// snapshot prepares a record once and copies it, under the lock that
// guards pending ones (their readers copy them too).
func (r *callRecorder) snapshot(c *models.Call) models.Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !c.Prepared {
		r.prepare(c)
		c.Prepared = true
	}
	return *c
}

// write stores a batch with one statement.
func (r *callRecorder) write(batch []*models.Call) error {
	err := r.store.SaveCalls(context.Background(), r.copies(batch))
	if err != nil {
		r.failed.Store(true)
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
		cp := r.snapshot(c)
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
		r.batch.Sync()
		cp := r.snapshot(c)
		return &cp, nil
	}
	return r.store.CallByID(ctx, id)
}

// sync waits until every record queued so far is written.
func (r *callRecorder) sync() { r.batch.Sync() }

// close writes what is queued and stops the writer.
// close writes what is queued and stops the writer; then, unless a write
// failed, the journal is no longer needed.
func (r *callRecorder) close() {
	r.once.Do(func() {
		close(r.stop)
		<-r.done
		r.batch.Close()
		if r.journal != nil {
			segs, _ := r.journal.rotate()
			if !r.failed.Load() {
				r.journal.remove(segs)
			}
			r.journal.close()
		}
	})
}

// replay inserts the records a previous run journaled but did not write
// (those the database lacks), then deletes their segments.
func (r *callRecorder) replay(ctx context.Context) (int, error) {
	j := r.journal
	if j == nil {
		if j = r.leftover; j == nil {
			return 0, nil
		}
		defer func() { j.close(); r.leftover = nil }()
	}
	recs, segs, err := j.leftBehind()
	if err != nil {
		return 0, err
	}
	n, err := r.store.InsertCallsIfAbsent(ctx, recs)
	if err != nil {
		return 0, err
	}
	j.remove(segs)
	return n, nil
}
