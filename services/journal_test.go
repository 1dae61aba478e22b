package services

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"toolbelt/models"
)

// A crash after records were journaled but before they were written: the
// next start inserts the ones the database lacks, leaves the newer ones it
// has, skips a torn last line, and deletes the segments.
func TestJournalReplay(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := models.Open(ctx, filepath.Join(dir, "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	now := time.Now().UTC().Truncate(time.Millisecond)
	rec := func(id, status string) *models.Call {
		return &models.Call{ID: id, Tool: "file_read", Status: status, Arguments: `{"path":"a"}`, Result: `{"status":"` + status + `"}`,
			Request: `{"tool":"file_read"}`, CreatedAt: now, FinishedAt: &now}
	}

	first := openCallJournal(dir, log)
	for _, c := range []*models.Call{rec("lost-sync", "succeeded"), rec("lost-async", "queued"), rec("kept", "queued")} {
		if err := first.append(c); err != nil {
			t.Fatal(err)
		}
	}
	// The database already has a newer state of "kept".
	if err := store.SaveCalls(ctx, []*models.Call{rec("kept", "succeeded")}); err != nil {
		t.Fatal(err)
	}
	// The process dies mid-write: a torn line at the end.
	f, _ := os.OpenFile(first.path(first.seq), os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.WriteString(`{"id":"torn","tool":"fi`)
	_ = f.Close()

	// The next start.
	r := newCallRecorder(store, func(*models.Call) {}, openCallJournal(dir, log), log)
	t.Cleanup(r.close)
	// The new run journals and retires its own segments meanwhile, never
	// the old ones.
	fresh := rec("new-run", "succeeded")
	if err := r.durable(ctx, fresh, r.save(ctx, fresh)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(journalEvery + 300*time.Millisecond)
	n, err := r.replay(ctx)
	if err != nil || n != 2 {
		t.Fatalf("replay: %d %v, want 2 restored", n, err)
	}
	for id, want := range map[string]string{"lost-sync": "succeeded", "lost-async": "queued", "kept": "succeeded"} {
		got, err := store.CallByID(ctx, id)
		if err != nil || got.Status != want {
			t.Errorf("%s: %v %+v, want %s", id, err, got, want)
			continue
		}
		if id == "lost-sync" && (got.Result != `{"status":"succeeded"}` || got.Request != `{"tool":"file_read"}` || !got.CreatedAt.Equal(now)) {
			t.Errorf("restored record differs: %+v", got)
		}
	}
	if _, err := os.Stat(first.path(first.seq)); !os.IsNotExist(err) {
		t.Errorf("the replayed segment is still there: %v", err)
	}
}

// A journaled record's segment is deleted once the record is written.
func TestJournalRetires(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := models.Open(ctx, filepath.Join(dir, "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	r := newCallRecorder(store, func(*models.Call) {}, openCallJournal(dir, log), log)
	t.Cleanup(r.close)
	c := &models.Call{ID: "x", Tool: "t", Status: "succeeded", CreatedAt: time.Now().UTC()}
	ack := r.save(ctx, c)
	if err := r.durable(ctx, c, ack); err != nil {
		t.Fatal(err)
	}
	// seq under the journal's lock: the retiring goroutine rotates it.
	r.journal.mu.Lock()
	seg := r.journal.path(r.journal.seq)
	r.journal.mu.Unlock()
	if raw, _ := os.ReadFile(seg); len(raw) == 0 {
		t.Fatal("the record was not journaled")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		files, _ := filepath.Glob(filepath.Join(dir, "journal", "*.jsonl"))
		nonEmpty := 0
		for _, f := range files {
			if st, err := os.Stat(f); err == nil && st.Size() > 0 {
				nonEmpty++
			}
		}
		if nonEmpty == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("journal segments not retired: %v", files)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := store.CallByID(ctx, "x"); err != nil {
		t.Fatal(err)
	}
}
