package models

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestCallStatsQueries(t *testing.T) {
	eachStore(t, func(t *testing.T, store *Store) {
		ctx := context.Background()
		// Migrating again (a restart) keeps working.
		if err := store.migrate(ctx); err != nil {
			t.Fatalf("a second migration: %v", err)
		}
		hour := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
		rows := []*Call{
			{ID: "a", Tool: "file_read", Status: "succeeded", Cached: true, TotalMs: 7, CreatedAt: hour},
			{ID: "b", Tool: "file_read", Status: "failed", ErrorCode: "TIMEOUT", TotalMs: 10_000, CreatedAt: hour.Add(59 * time.Minute)},
			{ID: "c", Tool: "web_search", Status: "running", CreatedAt: hour.Add(time.Hour)},
			{ID: "d", Tool: "web_search", Status: "refused", ErrorCode: "VALIDATION_ERROR", CreatedAt: hour.Add(90 * time.Minute)},
			// A reviewer denied it: nothing ran either.
			{ID: "e", Tool: "file_read", Status: "failed", ErrorCode: CodeConfirmationDenied, TotalMs: 60_000, CreatedAt: hour.Add(100 * time.Minute)},
		}
		if err := store.SaveCalls(ctx, rows); err != nil {
			t.Fatal(err)
		}
		var got []CallStat
		if err := store.ScanCallStats(ctx, hour, hour.Add(time.Hour), func(c CallStat) { got = append(got, c) }); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 {
			t.Fatalf("scan of the first hour: %+v", got)
		}
		for _, c := range got {
			want := CallStat{Tool: "file_read", Status: "succeeded", Cached: true, TotalMs: 7}
			if c.Status == "failed" {
				want = CallStat{Tool: "file_read", Status: "failed", ErrorCode: "TIMEOUT", TotalMs: 10_000}
			}
			if c != want {
				t.Errorf("scanned %+v, want %+v", c, want)
			}
		}
		counts, err := store.CountCallsBetween(ctx, []time.Time{hour, hour.Add(time.Hour), hour.Add(2 * time.Hour)})
		if err != nil || len(counts) != 2 || counts[0] != 2 || counts[1] != 3 {
			t.Fatalf("counts %v %v", counts, err)
		}
		outcomes, err := store.ToolOutcomes(ctx, hour, hour.Add(2*time.Hour))
		// A running call has not ended, and a refused or denied one never
		// ran.
		if err != nil || len(outcomes) != 1 || outcomes[0] != (ToolOutcome{Tool: "file_read", Finished: 2, Failed: 1}) {
			t.Fatalf("outcomes %+v %v, want file_read's 2 calls, 1 failed", outcomes, err)
		}

		// The scan and the counts read the covering index, not the table.
		for _, q := range []string{scanCallStatsSQL, "SELECT COUNT(*) FROM calls WHERE created_at >= ? AND created_at < ?"} {
			covering := "COVERING INDEX idx_calls_stats"
			if store.dialect.postgres {
				covering = "Index Only Scan using idx_calls_stats"
			}
			if plan := queryPlan(t, store, q, hour, hour); !strings.Contains(plan, covering) {
				t.Errorf("%s\nplan %s", q, plan)
			}
		}
	})
}

func TestCountPendingApprovals(t *testing.T) {
	eachStore(t, func(t *testing.T, store *Store) {
		ctx := context.Background()
		now := time.Now().UTC()
		for i, a := range []Approval{
			{ID: "waiting", Status: ApprovalPending, ExpiresAt: now.Add(time.Hour)},
			{ID: "expired", Status: ApprovalPending, ExpiresAt: now.Add(-time.Minute)},
			{ID: "decided", Status: ApprovalApproved, ExpiresAt: now.Add(time.Hour)},
		} {
			c := &Call{ID: "call" + a.ID, Tool: "t", Status: "awaiting_approval", CreatedAt: now.Add(time.Duration(i) * time.Second)}
			a.CallID = c.ID
			if err := store.CreateApproval(ctx, &a, c, nil, 0); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := store.CountPendingApprovals(ctx, now); err != nil || n != 1 {
			t.Fatalf("pending %d %v, want 1", n, err)
		}
	})
}
