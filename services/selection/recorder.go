package selection

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"toolbelt/models"
)

// selectionRecorder writes selection records in batches, off the
// selection path. The HTTP answer waits until the record is committed
// (Selector.Committed: its id is acknowledged to the caller for feedback),
// sharing one write with the selections answered at the same moment.
// Records not yet written are served from memory, so feedback right after
// a selection finds it. The batches are written while the selector's Run
// runs (which writes what is queued when it ends); otherwise each record
// is written when it is made.
type selectionRecorder struct {
	store *models.Store
	log   *slog.Logger

	mu      sync.Mutex
	pending map[string]*models.Selection // id → not yet written
	last    map[string]*models.Selection // session → newest pending
	batch   *models.Batcher[*models.Selection]
}

func newSelectionRecorder(store *models.Store, log *slog.Logger) *selectionRecorder {
	r := &selectionRecorder{
		store: store, log: log,
		pending: map[string]*models.Selection{}, last: map[string]*models.Selection{},
	}
	r.batch = models.NewBatcher(r.write)
	return r
}

// record queues a selection and returns the channel that receives the
// result of its write; when the queue is full it writes at once.
func (r *selectionRecorder) record(ctx context.Context, sel *models.Selection) <-chan error {
	sel.CreatedAt = time.Now().UTC()
	r.mu.Lock()
	r.pending[sel.ID] = sel
	if sel.SessionID != "" {
		r.last[sel.SessionID] = sel
	}
	r.mu.Unlock()
	if ack, ok := r.batch.Enqueue(sel); ok {
		return ack
	}
	err := r.store.CreateSelections(ctx, []*models.Selection{sel})
	r.written([]*models.Selection{sel})
	ack := make(chan error, 1)
	ack <- err
	return ack
}

// SelectionRetention is how long selection records are kept: long enough
// for feedback and calls to refer to them, short enough that the table
// does not grow without end.
const SelectionRetention = 30 * 24 * time.Hour

// pruneEvery is how often Run prunes the records past their retention.
const pruneEvery = time.Hour

// pruneRecords prunes the records past their retention now and every
// pruneEvery until ctx ends.
func (s *Selector) pruneRecords(ctx context.Context) {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		s.recorder.prune()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *selectionRecorder) prune() {
	n, err := r.store.DeleteSelectionsBefore(context.Background(), time.Now().Add(-SelectionRetention))
	if err != nil {
		r.log.Error("prune selection records", "err", err)
	} else if n > 0 {
		r.log.Info("pruned selection records", "count", n, "older_than", SelectionRetention)
	}
	// What calls said of selections goes with them.
	n, err = r.store.DeleteRetrievalOutcomesBefore(context.Background(), time.Now().Add(-SelectionRetention))
	if err != nil {
		r.log.Error("prune retrieval outcomes", "err", err)
	} else if n > 0 {
		r.log.Info("pruned retrieval outcomes", "count", n, "older_than", SelectionRetention)
	}
}

// write stores a batch in one transaction.
func (r *selectionRecorder) write(batch []*models.Selection) error {
	err := r.store.CreateSelections(context.Background(), batch)
	if err != nil {
		r.log.Error("record selections", "err", err, "count", len(batch))
	}
	r.written(batch)
	return err
}

func (r *selectionRecorder) written(batch []*models.Selection) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range batch {
		delete(r.pending, s.ID)
		if r.last[s.SessionID] == s {
			delete(r.last, s.SessionID)
		}
	}
}

// byID finds a selection, pending or written.
func (r *selectionRecorder) byID(ctx context.Context, id string) (*models.Selection, error) {
	r.mu.Lock()
	sel, ok := r.pending[id]
	r.mu.Unlock()
	if ok {
		return sel, nil
	}
	return r.store.SelectionByID(ctx, id)
}

// lastOf finds a session's newest selection made no later than before,
// pending or written.
func (r *selectionRecorder) lastOf(ctx context.Context, session string, before time.Time) (*models.Selection, error) {
	r.mu.Lock()
	sel, ok := r.last[session]
	r.mu.Unlock()
	if ok && !sel.CreatedAt.After(before) {
		return sel, nil
	}
	return r.store.LastSelection(ctx, session, before)
}

// lastKnown is the id of the newest selection of session made before
// before that this instance made ("" when it made none): what lastOf
// answers without the store.
func (r *selectionRecorder) lastKnown(session string, before time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sel, ok := r.last[session]; ok && !sel.CreatedAt.After(before) {
		return sel.ID
	}
	return ""
}
