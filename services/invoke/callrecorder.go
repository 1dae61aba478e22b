package invoke

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"golang.org/x/sync/errgroup"

	"toolbelt/models"
)

// callRecorder writes call records in batches, off the call path (the
// redaction of the arguments happens on the writer too). Before a call is
// answered its record is made durable (acknowledge): appended to the
// journal on SQLite, otherwise committed with the answers of the same
// moment (group commit); so no answered call is lost to a crash. Records
// being written are read from memory; sync waits until everything queued
// is written (listings use it).
//
// A write that fails is retried with backoff (a database restarting, a
// connection cut); when the database stays unreachable, the records are
// spooled: appended to the journal and fsync'd, kept in memory (the
// backlog, still read from there) and written again every
// drainEvery until the database takes them, or replayed at the next
// start. Only when the spool fails too (a full disk) does the write
// fail, and the answer say the call was not recorded.
type callRecorder struct {
	store *models.Store
	// saveCalls writes records: the store's SaveCalls (a test injects
	// its failures).
	saveCalls func(context.Context, []*models.Call) error
	log       *slog.Logger
	// prepare finishes a record before anyone reads or stores it (the
	// invoker redacts the arguments there, off the call path).
	prepare func(*models.Call)

	mu      sync.Mutex
	pending map[string]*models.Call
	batch   *models.Batcher[*models.Call]

	// journal spools what the database could not take, and holds what
	// an earlier run left behind (replayed at start). answers makes it
	// the answers' durability too (SQLite: one process, whose journal
	// its next start reads); on a database several instances share,
	// answers wait for the commit instead, which they all see.
	journal *callJournal
	answers bool

	// wmu serializes writes: a batch and the backlog it joins are
	// written in order, so a spooled record never overwrites a newer
	// one. backlog holds the records spooled and not written yet, by id.
	wmu     sync.Mutex
	backlog map[string]*models.Call
	backed  atomic.Int64
	// retryFor bounds the retries of a write before it is spooled.
	retryFor time.Duration

	once sync.Once // close's
}

// Timings of the recorder: journal segments are retired every
// journalEvery; a failed write is retried for up to recordRetry before
// its records are spooled; the backlog is written again every drainEvery.
const (
	journalEvery = time.Second
	recordRetry  = time.Second
	drainEvery   = 500 * time.Millisecond
)

// newCallRecorder starts nothing: records are written in batches while
// run runs, and by whoever saves them otherwise.
func newCallRecorder(store *models.Store, prepare func(*models.Call), journal *callJournal, log *slog.Logger) *callRecorder {
	r := &callRecorder{store: store, saveCalls: store.SaveCalls, log: log, prepare: prepare, pending: map[string]*models.Call{}, journal: journal,
		answers: journal != nil, backlog: map[string]*models.Call{}, retryFor: recordRetry}
	r.batch = models.NewBatcher(r.write)
	return r
}

// run writes the records queued in batches and retires the journal until
// ctx ends, then writes what is queued and returns.
func (r *callRecorder) run(ctx context.Context) error {
	var g errgroup.Group
	g.Go(func() error { r.retire(ctx); return nil })
	g.Go(func() error { return r.batch.Run(ctx) })
	return g.Wait()
}

// durable returns once the record c (queued with ack) survives a crash:
// written already, appended to the journal, or else committed (or
// spooled). Its error means none of these could be done.
func (r *callRecorder) durable(ctx context.Context, c *models.Call, ack <-chan error) error {
	select {
	case err := <-ack:
		return err
	default:
	}
	if r.answers && c != nil {
		cp := r.snapshot(c) // journaled arguments are redacted too
		err := r.journal.append(&cp)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errJournalClosed) { // shutting down: the writer drains the queue
			r.log.Warn("journal the call: waiting for the database instead", "call_id", c.ID, "err", err)
		}
	}
	return r.wait(ctx, ack)
}

// retire deletes the journal segments whose records are all written,
// and writes the backlog again: every second it closes the current
// segment and waits until everything queued so far is written (each
// journaled record was queued before it was journaled); with nothing
// spooled left, the closed segments are done with. It returns when ctx
// ends.
func (r *callRecorder) retire(ctx context.Context) {
	t := time.NewTicker(drainEvery)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if r.backed.Load() > 0 {
			_ = r.write(nil) // the backlog alone
		}
		if r.journal == nil || time.Since(last) < journalEvery {
			continue
		}
		last = time.Now()
		segs, err := r.journal.rotate()
		if err != nil {
			r.log.Error("rotate call journal", "err", err)
			continue
		}
		if len(segs) == 0 {
			continue
		}
		r.batch.Sync()
		r.wmu.Lock()
		if len(r.backlog) == 0 {
			r.journal.remove(segs)
		}
		r.wmu.Unlock()
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
	ack := make(chan error, 1)
	ack <- r.write([]*models.Call{c})
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

// write stores a batch, after the backlog, with one statement: retried
// with backoff while the database does not answer, then spooled (see
// callRecorder). A nil error means every record of the batch is written
// or spooled.
func (r *callRecorder) write(batch []*models.Call) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	all := batch
	if len(r.backlog) > 0 {
		all = make([]*models.Call, 0, len(r.backlog)+len(batch))
		for _, c := range r.backlog {
			all = append(all, c)
		}
		all = append(all, batch...) // newer: SaveCalls keeps the last of an id
	}
	if len(all) == 0 {
		return nil
	}
	rows := r.copies(all)
	// The database is known to be down while there is a backlog: one
	// try, not the answers' wait again.
	tries := uint(0)
	if len(r.backlog) > 0 {
		tries = 1
	}
	_, err := backoff.Retry(context.Background(), func() (struct{}, error) {
		return struct{}{}, r.saveCalls(context.Background(), rows)
	}, backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: 50 * time.Millisecond, RandomizationFactor: 0.2,
		Multiplier: 2, MaxInterval: 400 * time.Millisecond}), backoff.WithMaxElapsedTime(r.retryFor), backoff.WithMaxTries(tries))
	if err == nil {
		if len(r.backlog) > 0 {
			r.log.Info("spooled call records written", "count", len(r.backlog))
			clear(r.backlog)
			r.backed.Store(0)
		}
		r.written(all)
		return nil
	}
	// Spooled: fsync'd in the journal, kept for the next try.
	spooled := r.spool(rows[len(rows)-len(batch):])
	for _, c := range batch {
		r.backlog[c.ID] = c
	}
	r.backed.Store(int64(len(r.backlog)))
	if len(batch) > 0 {
		r.log.Error("record calls", "err", err, "count", len(batch), "spooled", spooled == nil, "backlog", len(r.backlog))
	}
	if spooled != nil {
		return fmt.Errorf("%w; and spooling them failed: %w", err, spooled)
	}
	return nil
}

// spool appends records to the journal and syncs it to disk.
func (r *callRecorder) spool(rows []*models.Call) error {
	if len(rows) == 0 {
		return nil
	}
	if r.journal == nil {
		return errors.New("no call journal to spool to")
	}
	return r.journal.appendSync(rows)
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

// close writes the backlog a last time; then, unless records are still
// spooled (kept for the next start), the journal is no longer needed. It
// comes after run ended (or when it never ran).
func (r *callRecorder) close() {
	r.once.Do(func() {
		_ = r.write(nil) // the backlog's last chance
		if r.journal != nil {
			segs, _ := r.journal.rotate()
			r.wmu.Lock()
			if len(r.backlog) == 0 {
				r.journal.remove(segs)
			} else {
				r.log.Error("call records left spooled for the next start", "count", len(r.backlog))
			}
			r.wmu.Unlock()
			r.journal.close()
		}
	})
}

// replay writes the records a previous run journaled or spooled but did
// not write (forward only: see models.Store.RestoreCalls), then deletes
// their segments.
func (r *callRecorder) replay(ctx context.Context) (int, error) {
	if r.journal == nil {
		return 0, nil
	}
	recs, segs, err := r.journal.leftBehind()
	if err != nil {
		return 0, err
	}
	n, err := r.store.RestoreCalls(ctx, recs)
	if err != nil {
		return 0, err
	}
	r.journal.remove(segs)
	return n, nil
}
