package invoke

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"toolbelt/internal/poll"
	"toolbelt/models"
	"toolbelt/models/modelstest"
)

// A crash after records were journaled but before they were written: the
// next start inserts the ones the database lacks, leaves the newer ones it
// has, skips a torn last line, and deletes the segments.
func TestJournalReplay(t *testing.T) {
	ctx := context.Background()
	store, _ := modelstest.Store(t)
	dir, log := t.TempDir(), quiet
	now := time.Now().UTC().Truncate(time.Millisecond)
	rec := func(id, status string) *models.Call {
		return &models.Call{ID: id, Tool: "file_read", Status: status, Arguments: `{"path":"a"}`, Result: `{"status":"` + status + `"}`,
			Request: `{"tool":"file_read"}`, CreatedAt: now, FinishedAt: &now}
	}

	first := openCallJournal(dir, log)
	// A queued call keeps its request, up to a whole request body.
	big := rec("lost-big", "queued")
	big.Request = `{"tool":"file_write","arguments":{"content":"` + strings.Repeat("x", 900<<10) + `"}}`
	for _, c := range []*models.Call{rec("lost-sync", "succeeded"), rec("lost-async", "queued"), rec("kept", "queued"), big} {
		if err := first.append(c); err != nil {
			t.Fatal(err)
		}
	}
	// The database already has a newer state of "kept".
	if err := store.SaveCalls(ctx, []*models.Call{rec("kept", "succeeded")}); err != nil {
		t.Fatal(err)
	}
	// The process dies mid-write: a torn line at the end.
	f, err := os.OpenFile(first.path(first.seq), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"id":"torn","tool":"fi`); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	// The next start.
	r := newCallRecorder(store, func(*models.Call) {}, openCallJournal(dir, log), log)
	runRecorder(t, r)
	// The new run journals and retires its own segments meanwhile, never
	// the old ones.
	fresh := rec("new-run", "succeeded")
	if err := r.durable(ctx, fresh, r.save(ctx, fresh)); err != nil {
		t.Fatal(err)
	}
	r.journal.mu.Lock()
	freshSeg := r.journal.path(r.journal.seq)
	r.journal.mu.Unlock()
	poll.True(t, 10*time.Second, "the new run's segment retired", func() bool {
		_, err := os.Stat(freshSeg)
		return os.IsNotExist(err)
	})
	if _, err := os.Stat(first.path(first.seq)); err != nil {
		t.Fatalf("the new run retired the old run's segment: %v", err)
	}
	n, err := r.replay(ctx)
	if err != nil || n != 3 {
		t.Fatalf("replay: %d %v, want 3 restored", n, err)
	}
	if got, err := store.CallByID(ctx, "lost-big"); err != nil || got.Request != big.Request {
		t.Errorf("the record with a large request was not restored whole: %v", err)
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
	store, _ := modelstest.Store(t)
	dir, log := t.TempDir(), quiet
	r := newCallRecorder(store, func(*models.Call) {}, openCallJournal(dir, log), log)
	runRecorder(t, r)
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
	poll.Until(t, 10*time.Second, "the journal segments retired", func() (bool, string) {
		left := nonEmptySegments(dir)
		return len(left) == 0, fmt.Sprintf("left %v", left)
	})
	if _, err := store.CallByID(ctx, "x"); err != nil {
		t.Fatal(err)
	}
}

// A hand-written journal line reads back as the record it was made of,
// whatever its strings hold, and says what encoding/json would.
func FuzzJournalLine(f *testing.F) {
	for _, s := range []string{"", `{"path":"a.txt"}`, "quote \" backslash \\ tab \t nl \n nul \x00 del \x7f", "é ☃ 😀 \u2028", "bad \xff\xfe utf8 \xe2\x82", "<&>"} {
		f.Add(s, s+"x", uint(7), int64(-3), true, false)
	}
	f.Fuzz(func(t *testing.T, s, u string, principal uint, ms int64, cached, finished bool) {
		created := time.Unix(1_700_000_000, ms&0xffffff).UTC()
		c := models.Call{ID: s, PrincipalID: principal, SessionID: u, Tool: s, Version: u, ParentID: s, Arguments: u, Status: s,
			ErrorCode: u, Result: s + u, Request: u, Stages: s, Attempts: int(ms % 1000), Cached: cached, QueueMs: ms, RunMs: -ms, TotalMs: ms * 3, CreatedAt: created}
		if finished {
			done := created.Add(time.Duration(ms))
			c.FinishedAt = &done
		}
		line := appendJournalLine(nil, &c)
		if len(line) == 0 || line[len(line)-1] != '\n' || bytes.Count(line, []byte{'\n'}) != 1 {
			t.Fatalf("not one line: %q", line)
		}
		var got, want journalRecord
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatalf("line %q does not decode: %v", line, err)
		}
		std, _ := json.Marshal(journalRecord{Call: c, Result: c.Result, Request: c.Request, Stages: c.Stages})
		if err := json.Unmarshal(std, &want); err != nil {
			t.Fatal(err)
		}
		gotCall, wantCall := got.Call, want.Call
		if !gotCall.CreatedAt.Equal(wantCall.CreatedAt) || (gotCall.FinishedAt == nil) != (wantCall.FinishedAt == nil) ||
			(gotCall.FinishedAt != nil && !gotCall.FinishedAt.Equal(*wantCall.FinishedAt)) {
			t.Fatalf("times: %v %v, want %v %v", gotCall.CreatedAt, gotCall.FinishedAt, wantCall.CreatedAt, wantCall.FinishedAt)
		}
		gotCall.CreatedAt, wantCall.CreatedAt, gotCall.FinishedAt, wantCall.FinishedAt = time.Time{}, time.Time{}, nil, nil
		if gotCall != wantCall || got.Result != want.Result || got.Request != want.Request || got.Stages != want.Stages {
			t.Fatalf("line %q reads as\n%+v\nencoding/json's as\n%+v", line, got, want)
		}
		if utf8.ValidString(s) && got.ID != s {
			t.Fatalf("valid UTF-8 %q read back as %q", s, got.ID)
		}
	})
}

// Appenders racing each other across segment switches: every line lands
// whole, once.
func TestJournalConcurrentAppends(t *testing.T) {
	dir, log := t.TempDir(), quiet
	j := openCallJournal(dir, log)
	const workers, each = 8, 1500
	pad := strings.Repeat("x", 400) // about 6 MB in all: at least one switch
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				c := &models.Call{ID: fmt.Sprintf("w%d-%d", w, i), Tool: "t", Status: "succeeded", Result: pad, CreatedAt: time.Now()}
				if err := j.append(c); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	j.close()
	segs, _ := filepath.Glob(filepath.Join(dir, "journal", "*.jsonl"))
	if len(segs) < 2 {
		t.Fatalf("%d segments: no switch happened", len(segs))
	}
	recs, _, err := openCallJournal(dir, log).leftBehind()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[r.ID] || r.Result != pad {
			t.Fatalf("record %s read twice or torn", r.ID)
		}
		seen[r.ID] = true
	}
	if len(seen) != workers*each {
		t.Fatalf("%d records read back, want %d", len(seen), workers*each)
	}
}

// runRecorder runs r (its batches and the upkeep of its journal) until
// the test ends, then closes it. It returns once r takes records.
func runRecorder(t *testing.T, r *callRecorder) {
	t.Cleanup(r.close)
	running(t, r.run)
	for !r.batch.Running() {
		runtime.Gosched()
	}
}

// nonEmptySegments lists the journal segments under dir that still hold
// records.
func nonEmptySegments(dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "journal", "*.jsonl"))
	var left []string
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && st.Size() > 0 {
			left = append(left, f)
		}
	}
	return left
}
