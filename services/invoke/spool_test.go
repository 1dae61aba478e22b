package invoke

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"toolbelt/internal/poll"
	"toolbelt/models"
	"toolbelt/models/modelstest"
)

// While the database refuses writes, a record is retried, then spooled
// (fsync'd in the journal) and acknowledged; it stays readable, and is
// written once the database takes writes again, after which its segment
// goes. The same record is never written backwards by the late spool.
func TestRecordsSpoolWhileTheDatabaseIsDown(t *testing.T) {
	ctx := context.Background()
	store, _ := modelstest.Store(t)
	dir := t.TempDir()
	r := newCallRecorder(store, func(*models.Call) {}, openCallJournal(dir, quiet), quiet)
	r.answers = false // as on Postgres: the answer waits for the commit
	r.retryFor = 100 * time.Millisecond
	runRecorder(t, r)
	var down atomic.Bool
	var tries atomic.Int64
	r.saveCalls = func(ctx context.Context, cs []*models.Call) error {
		tries.Add(1)
		if down.Load() {
			return errors.New("dial unix /run/postgresql: connection refused")
		}
		return store.SaveCalls(ctx, cs)
	}
	down.Store(true)
	now := time.Now().UTC()
	c := &models.Call{ID: "spooled", Tool: "file_write", Status: models.StatusSucceeded, Result: `{"ok":true}`, CreatedAt: now, FinishedAt: &now}
	if err := r.durable(ctx, c, r.save(ctx, c)); err != nil {
		t.Fatalf("a record the database refused but the spool kept was not acknowledged: %v", err)
	}
	if tries.Load() < 2 {
		t.Errorf("the write was tried %d times before it was spooled, want retries", tries.Load())
	}
	if _, err := store.CallByID(ctx, "spooled"); !errors.Is(err, models.ErrNotFound) {
		t.Fatalf("the database has the record though it refused it: %v", err)
	}
	if got, err := r.byID(ctx, "spooled"); err != nil || got.Status != models.StatusSucceeded {
		t.Fatalf("the spooled record is not readable: %+v %v", got, err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "journal", "*.jsonl"))
	spooled := false
	for _, s := range segs {
		if raw, _ := os.ReadFile(s); len(raw) > 0 {
			spooled = true
		}
	}
	if !spooled {
		t.Fatal("nothing was spooled to the journal")
	}

	down.Store(false)
	var got *models.Call
	poll.Until(t, 10*time.Second, "the spooled record written once the database took writes again", func() (bool, string) {
		var err error
		got, err = store.CallByID(ctx, "spooled")
		return err == nil, fmt.Sprint(err)
	})
	if got.Status != models.StatusSucceeded || got.Result != `{"ok":true}` {
		t.Fatalf("the spooled record was written as %+v", got)
	}
	// Its segments retire once nothing is spooled any more.
	poll.Until(t, 10*time.Second, "the spool segments retired after the backlog was written", func() (bool, string) {
		left := nonEmptySegments(dir)
		return len(left) == 0, fmt.Sprintf("left %v", left)
	})
}

// With the database down and no journal to spool to, the record is not
// durable and durable says so: the answer then says NOT_RECORDED.
func TestRecordNotDurableWithoutSpool(t *testing.T) {
	ctx := context.Background()
	store, _ := modelstest.Store(t)
	r := newCallRecorder(store, func(*models.Call) {}, nil, quiet)
	r.retryFor = 50 * time.Millisecond
	runRecorder(t, r)
	r.saveCalls = func(context.Context, []*models.Call) error { return errors.New("connection refused") }
	now := time.Now().UTC()
	c := &models.Call{ID: "lost", Tool: "t", Status: models.StatusSucceeded, CreatedAt: now, FinishedAt: &now}
	err := r.durable(ctx, c, r.save(ctx, c))
	if err == nil {
		t.Fatal("a record neither written nor spooled was acknowledged")
	}
	res := notRecorded(ToolResult{CallID: "lost", Status: models.StatusSucceeded, Success: true, Data: []byte(`{"n":1}`)}, err)
	if res.Status != models.StatusUnrecorded || res.Error == nil || res.Error.Code != models.CodeNotRecorded || res.Error.Retryable ||
		string(res.Data) != `{"n":1}` || !res.Success {
		t.Fatalf("answer %+v, want unrecorded with NOT_RECORDED, not retryable, and the data", res)
	}
}

// A record spooled late never moves its call back: the running record
// spooled while the database was down does not replace the end written
// after it.
func TestSpoolWritesInOrder(t *testing.T) {
	ctx := context.Background()
	store, _ := modelstest.Store(t)
	r := newCallRecorder(store, func(*models.Call) {}, openCallJournal(t.TempDir(), quiet), quiet)
	r.answers = false
	r.retryFor = 50 * time.Millisecond
	runRecorder(t, r)
	var down atomic.Bool
	r.saveCalls = func(ctx context.Context, cs []*models.Call) error {
		if down.Load() {
			return errors.New("connection refused")
		}
		return store.SaveCalls(ctx, cs)
	}
	now := time.Now().UTC()
	down.Store(true)
	queued := &models.Call{ID: "a", Tool: "t", Status: models.StatusQueued, Request: `{}`, CreatedAt: now}
	if err := r.wait(ctx, r.save(ctx, queued)); err != nil {
		t.Fatal(err)
	}
	down.Store(false)
	end := &models.Call{ID: "a", Tool: "t", Status: models.StatusSucceeded, CreatedAt: now, FinishedAt: &now}
	if err := r.wait(ctx, r.save(ctx, end)); err != nil {
		t.Fatal(err)
	}
	r.sync()
	time.Sleep(2 * drainEvery) // a drain, had the backlog kept the queued record
	if got, err := store.CallByID(ctx, "a"); err != nil || got.Status != models.StatusSucceeded {
		t.Fatalf("call a is %+v (%v), want succeeded", got, err)
	}
	if r.backed.Load() != 0 {
		t.Fatalf("backlog %d after the database took the writes", r.backed.Load())
	}
}
