package models

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"
)

func TestCallsInStateUsesOpenIndex(t *testing.T) {
	eachStore(t, func(t *testing.T, store *Store) {
		ctx := context.Background()
		start := time.Now().UTC()
		var rows []*Call
		for i, status := range []string{"succeeded", "running", "failed", "queued", "running", "awaiting_approval"} {
			rows = append(rows, &Call{ID: fmt.Sprintf("c%d", i), Tool: "t", Status: status, CreatedAt: start.Add(time.Duration(i) * time.Second)})
		}
		if err := store.SaveCalls(ctx, rows); err != nil {
			t.Fatal(err)
		}
		got, err := store.CallsInState(ctx, "running")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ID != "c1" || got[1].ID != "c4" {
			t.Fatalf("running calls = %+v, want c1 then c4", got)
		}
		// A queued call becomes running and is found; a finished one saved
		// running (a late record) stays finished: calls move forward only.
		rows[0].Status, rows[3].Status = "running", "running"
		if err := store.SaveCalls(ctx, []*Call{rows[0], rows[3]}); err != nil {
			t.Fatal(err)
		}
		if got, _ = store.CallsInState(ctx, "running"); len(got) != 3 || got[0].ID != "c1" || got[1].ID != "c3" {
			t.Fatalf("after update: %+v", got)
		}
		if plan := queryPlan(t, store, "SELECT * FROM calls WHERE status = ? AND "+openCalls+" ORDER BY created_at", "running"); !strings.Contains(plan, "idx_calls_open") {
			t.Fatalf("the open-calls query does not use the partial index: %s", plan)
		}
		if hasIndex(t, store, "idx_calls_status") {
			t.Fatal("the full status index is still there")
		}
	})
}

// The hand-written upsert must name every stored column of Call but the
// claim's, which only the claim statements write.
func TestCallColumnsMatchSchema(t *testing.T) {
	eachStore(t, func(t *testing.T, store *Store) {
		stmt := &gorm.Statement{DB: store.db}
		if err := stmt.Parse(&Call{}); err != nil {
			t.Fatal(err)
		}
		var written []string
		for _, name := range stmt.Schema.DBNames {
			if f := stmt.Schema.FieldsByDBName[name]; f.Creatable || f.Updatable {
				written = append(written, name)
			}
		}
		if !slices.Equal(written, callColumns) {
			t.Fatalf("callColumns = %v\nschema      = %v", callColumns, written)
		}
		now := time.Now().UTC()
		in := &Call{ID: "x", PrincipalID: 7, SessionID: "s", Tool: "t", Version: "1", Arguments: "{}", Status: "succeeded", ErrorCode: "E",
			Result: "{}", Request: "r", Attempts: 2, Cached: true, QueueMs: 3, RunMs: 4, TotalMs: 5, CreatedAt: now, FinishedAt: &now}
		if err := store.SaveCalls(context.Background(), []*Call{in}); err != nil {
			t.Fatal(err)
		}
		got, err := store.CallByID(context.Background(), "x")
		if err != nil {
			t.Fatal(err)
		}
		if !sameTime(got.CreatedAt, now) || got.FinishedAt == nil || !sameTime(*got.FinishedAt, now) {
			t.Fatalf("times: %v %v, want %v", got.CreatedAt, got.FinishedAt, now)
		}
		got.CreatedAt, got.FinishedAt, in.CreatedAt, in.FinishedAt = now, nil, now, nil
		if *got != *in {
			t.Fatalf("read back %+v\nwant         %+v", *got, *in)
		}
	})
}

// Each history filter reads its own index in time order.
func TestHistoryQueriesUseIndexes(t *testing.T) {
	eachStore(t, func(t *testing.T, store *Store) {
		for where, index := range map[string]string{
			"principal_id = 3":           "idx_calls_principal_time",
			"session_id = 's'":           "idx_calls_session_time",
			"tool = 'file_read'":         "idx_calls_tool_time",
			"created_at >= '2026-01-01'": "idx_calls_stats",
		} {
			if plan := queryPlan(t, store, "SELECT * FROM calls WHERE "+where+" ORDER BY created_at DESC, id DESC LIMIT 50"); !strings.Contains(plan, index) {
				t.Errorf("WHERE %s: plan %s, want %s", where, plan, index)
			}
		}
	})
}

// The per-second look for calls to take over reads the partial index of
// open calls, never the history.
func TestTakeOverLookUsesOpenIndex(t *testing.T) {
	eachStore(t, func(t *testing.T, store *Store) {
		for _, v := range []Void{{Now: time.Now(), Self: "me", Limit: 100}, {All: true}, {Now: time.Now(), Run: "old-run"}} {
			q := store.db.ToSQL(func(tx *gorm.DB) *gorm.DB {
				var n int64
				return voidCalls(tx, v).Limit(1).Count(&n)
			})
			if plan := queryPlan(t, store, q); !strings.Contains(plan, "idx_calls_open") {
				t.Errorf("%+v: plan %s, want idx_calls_open", v, plan)
			}
		}
	})
}

// A batch is written in chunks of the statement sizes: every row of a
// batch that needs each size lands, duplicates keep their last state, and
// a restore takes calls forward, never back.
func TestSaveCallsInChunks(t *testing.T) {
	eachStore(t, func(t *testing.T, store *Store) {
		ctx := context.Background()
		start := time.Now().UTC()
		mk := func(i int, status string) *Call {
			return &Call{ID: fmt.Sprintf("c%04d", i), Tool: "t", Status: status, CreatedAt: start.Add(time.Duration(i) * time.Millisecond)}
		}
		// 256 + 64 + 3×16 + 3×4 + 3×1 rows, and one id twice.
		const n = 256 + 64 + 48 + 12 + 3
		var rows []*Call
		for i := range n {
			rows = append(rows, mk(i, "running"))
			if i%5 == 0 { // not plain: these columns are bound, not constants
				rows[i].ParentID, rows[i].ErrorCode, rows[i].Request, rows[i].QueueMs, rows[i].RunMs = "p", "E", "r", 2, int64(i)
			}
		}
		rows = append(rows, mk(7, "succeeded"))
		// Plain again: the constants replace what the row held.
		rows = append(rows, mk(10, "succeeded"))
		if err := store.SaveCalls(ctx, rows); err != nil {
			t.Fatal(err)
		}
		var count int64
		store.db.Model(&Call{}).Count(&count)
		if count != n {
			t.Fatalf("stored %d rows, want %d", count, n)
		}
		if c, err := store.CallByID(ctx, "c0007"); err != nil || c.Status != "succeeded" {
			t.Fatalf("duplicate id kept %+v (%v), want its last state", c, err)
		}
		if c, _ := store.CallByID(ctx, "c0015"); c.ParentID != "p" || c.ErrorCode != "E" || c.Request != "r" || c.QueueMs != 2 || c.RunMs != 15 {
			t.Fatalf("a row that is not plain lost its values: %+v", c)
		}
		if c, _ := store.CallByID(ctx, "c0010"); c.Status != "succeeded" || c.ParentID != "" || c.ErrorCode != "" || c.RunMs != 0 {
			t.Fatalf("a row saved plain kept old values: %+v", c)
		}
		// Saved again plain after it was stored with values: they are cleared.
		again := mk(20, "succeeded")
		if err := store.SaveCalls(ctx, []*Call{again}); err != nil {
			t.Fatal(err)
		}
		if c, _ := store.CallByID(ctx, "c0020"); c.ParentID != "" || c.ErrorCode != "" || c.Request != "" || c.RunMs != 0 || c.QueueMs != 0 {
			t.Fatalf("an upsert of a plain row kept old values: %+v", c)
		}
		// Replay: 10 stored running rows journaled ended (their end
		// replaces them), 290 new ones, one of them journaled twice (its
		// last state is the one inserted), and one stored finished row
		// journaled queued (left alone: a record never moves a call back).
		var replay []*Call
		for i := n - 10; i < n+290; i++ {
			replay = append(replay, mk(i, "failed"))
		}
		replay = append(replay, mk(n+5, "succeeded"), mk(20, "queued"))
		restored, err := store.RestoreCalls(ctx, replay)
		if err != nil || restored != 300 {
			t.Fatalf("restored %d (%v), want 300", restored, err)
		}
		if c, _ := store.CallByID(ctx, fmt.Sprintf("c%04d", n+5)); c.Status != "succeeded" {
			t.Fatalf("a record journaled twice was restored as %s, not its last state", c.Status)
		}
		if c, _ := store.CallByID(ctx, fmt.Sprintf("c%04d", n-1)); c.Status != "failed" {
			t.Fatalf("a running row was not ended by its journaled end: %s", c.Status)
		}
		if c, _ := store.CallByID(ctx, "c0020"); c.Status != "succeeded" {
			t.Fatalf("a finished row was moved back to %s by a replayed record", c.Status)
		}
		store.db.Model(&Call{}).Count(&count)
		if count != n+290 {
			t.Fatalf("stored %d rows after replay, want %d", count, n+290)
		}
	})
}

// A held record (a synchronous call whose tool begins) is written with its
// claim, so another instance takes it over only once its lease lapsed;
// its end then replaces it as any record does.
func TestHeldCallIsClaimed(t *testing.T) {
	eachStore(t, func(t *testing.T, store *Store) {
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		until := now.Add(5 * time.Second)
		held := &Call{ID: "h1", Tool: "t", Status: StatusRunning, CreatedAt: now, Hold: true, ClaimedBy: "a#1", LeaseUntil: &until, StartedAt: &now}
		if err := store.SaveCalls(ctx, []*Call{held, {ID: "p1", Tool: "t", Status: StatusSucceeded, CreatedAt: now}}); err != nil {
			t.Fatal(err)
		}
		got, err := store.CallByID(ctx, "h1")
		if err != nil || got.ClaimedBy != "a#1" || got.LeaseUntil == nil || !got.LeaseUntil.Equal(until) || got.StartedAt == nil {
			t.Fatalf("held record stored as %+v (%v), want its claim", got, err)
		}
		decide := func(*Call) Takeover { return Takeover{Status: StatusInterrupted, ErrorCode: "INTERNAL", Result: "{}"} }
		if _, ended, err := store.TakeOverCalls(ctx, Void{Now: now, Self: "b#1", Limit: 10}, decide); err != nil || len(ended) != 0 {
			t.Fatalf("a held call was taken over within its lease: %v %v", ended, err)
		}
		if _, ended, err := store.TakeOverCalls(ctx, Void{Now: until.Add(time.Second), Self: "b#1", Limit: 10}, decide); err != nil || len(ended) != 1 {
			t.Fatalf("a held call whose lease lapsed was not taken over: %v %v", ended, err)
		}
		end := &Call{ID: "h1", Tool: "t", Status: StatusSucceeded, Result: `{"ok":true}`, CreatedAt: now, FinishedAt: &now}
		if err := store.SaveCalls(ctx, []*Call{end}); err != nil {
			t.Fatal(err)
		}
		if got, _ := store.CallByID(ctx, "h1"); got.Status != StatusSucceeded || got.Result != `{"ok":true}` {
			t.Fatalf("the real end did not replace the takeover's interrupted: %+v", got)
		}
	})
}
