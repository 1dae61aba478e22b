package ops

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"toolbelt/models"
	"toolbelt/models/modelstest"
)

// statsClock is 30 minutes into an hour, so the window's hours are easy
// to reason about.
var statsClock = time.Date(2026, 3, 10, 14, 30, 0, 0, time.UTC)

// saveStatCalls stores calls created ago before the clock.
func saveStatCalls(t testing.TB, store *models.Store, calls ...*models.Call) {
	t.Helper()
	for _, c := range calls {
		if c.ID == "" {
			c.ID = models.NewID() // ids are 32 characters: Postgres holds them to it
		}
	}
	if err := store.SaveCalls(context.Background(), calls); err != nil {
		t.Fatal(err)
	}
}

func statCall(tool, status, code string, ago time.Duration, ms int64) *models.Call {
	return &models.Call{Tool: tool, Status: status, ErrorCode: code, TotalMs: ms, CreatedAt: statsClock.Add(-ago)}
}

func TestStatsSummary(t *testing.T) {
	ctx := context.Background()
	store, _ := modelstest.Store(t)
	stats := NewStats(StatsDeps{Store: store, Now: func() time.Time { return statsClock }})

	var calls []*models.Call
	// file_read: 10 calls over the day, 1 failed, 4 cached, durations 1..10.
	for i := range 10 {
		c := statCall("file_read", models.StatusSucceeded, "", time.Duration(i+2)*time.Hour, int64(i+1))
		if i == 9 {
			c.Status, c.ErrorCode = models.StatusFailed, "TIMEOUT"
		}
		c.Cached = i < 4
		calls = append(calls, c)
	}
	// web_search: fine earlier, failing in the last hour.
	for i := range 20 {
		calls = append(calls, statCall("web_search", models.StatusSucceeded, "", 3*time.Hour+time.Duration(i)*time.Minute, 200))
	}
	for i := range 6 {
		status, code := models.StatusFailed, "UPSTREAM_ERROR"
		if i == 0 {
			status, code = models.StatusSucceeded, ""
		}
		calls = append(calls, statCall("web_search", status, code, time.Duration(i+1)*time.Minute, 300))
	}
	// An open call, a refusal, and calls outside the window.
	calls = append(calls,
		statCall("shell_exec", models.StatusAwaitingApproval, "", 10*time.Minute, 0),
		statCall("shell_exec", models.StatusRefused, "VALIDATION_ERROR", 20*time.Minute, 0),
		// A reviewer's denial (recorded failed, as agents read it): no
		// tool ran, so it is a refusal here too, and in the alerts.
		statCall("shell_exec", models.StatusFailed, models.CodeConfirmationDenied, 30*time.Minute, 90_000),
		statCall("file_read", models.StatusSucceeded, "", 25*time.Hour, 1),
		statCall("file_read", models.StatusSucceeded, "", -time.Minute, 1),
	)
	saveStatCalls(t, store, calls...)

	sum, err := stats.Summary(ctx, StatsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 3, 9, 15, 0, 0, 0, time.UTC); !sum.Since.Equal(want) || len(sum.Hourly) != 24 {
		t.Fatalf("window since %s with %d hours, want %s and 24", sum.Since, len(sum.Hourly), want)
	}
	// Refused, failed and waiting are apart: the refusal is not a failure,
	// and neither it nor the waiting call counts in the success rate.
	if sum.Calls != 39 || sum.Succeeded != 30 || sum.Failed != 6 || sum.Refused != 2 || sum.Open != 1 {
		t.Fatalf("calls %d succeeded %d failed %d refused %d open %d, want 39 30 6 2 1", sum.Calls, sum.Succeeded, sum.Failed, sum.Refused, sum.Open)
	}
	if sum.SuccessRate != round(30.0/36, 4) {
		t.Errorf("success rate %v, want 30 of the 36 that ran", sum.SuccessRate)
	}
	if len(sum.Refusals) != 2 || sum.Refusals[0].Calls != 1 || sum.Refusals[1].Calls != 1 {
		t.Errorf("refusals %+v", sum.Refusals)
	}
	var hourly HourCount
	for _, h := range sum.Hourly {
		hourly.Succeeded += h.Succeeded
		hourly.Failed += h.Failed
		hourly.Refused += h.Refused
		hourly.Open += h.Open
	}
	if hourly.Succeeded != 30 || hourly.Failed != 6 || hourly.Refused != 2 || hourly.Open != 1 {
		t.Errorf("hourly totals %+v", hourly)
	}
	var sh ToolStats
	for _, ts := range sum.Tools {
		if ts.Tool == "shell_exec" {
			sh = ts
		}
	}
	if sh.Calls != 3 || sh.Refused != 2 || sh.Open != 1 || sh.Failed != 0 || sh.SuccessRate != 0 || len(sh.Failures) != 0 || sh.P95Ms != 0 {
		t.Errorf("shell_exec (one refused, one denied, one waiting) %+v", sh)
	}
	if last := sum.Hourly[23]; last.Succeeded != 1 || last.Failed != 5 || last.Refused != 2 || last.Open != 1 {
		t.Errorf("current hour %+v, want 1 succeeded, 5 failed, 2 refused, 1 open", last)
	}
	if !slices.Equal(sum.Top, []string{"web_search", "file_read", "shell_exec"}) {
		t.Errorf("top %v", sum.Top)
	}
	var fr ToolStats
	for _, ts := range sum.Tools {
		if ts.Tool == "file_read" {
			fr = ts
		}
	}
	if fr.Calls != 10 || fr.SuccessRate != 0.9 || fr.CacheHitRate != 0.4 || fr.P50Ms != 5 || fr.P95Ms != 10 {
		t.Errorf("file_read %+v", fr)
	}
	if len(fr.Failures) != 1 || fr.Failures[0] != (CodeCount{Code: "TIMEOUT", Calls: 1, Rate: 0.1}) {
		t.Errorf("file_read failures %+v", fr.Failures)
	}
	if len(sum.Rising) != 1 || sum.Rising[0].Tool != "web_search" || sum.Rising[0].RecentCalls != 6 ||
		sum.Rising[0].RecentFailed != 5 || sum.Rising[0].PriorCalls != 20 || sum.Rising[0].PriorFailed != 0 {
		t.Errorf("rising %+v", sum.Rising)
	}
	if len(sum.Failures) == 0 || sum.Failures[0].Code != "UPSTREAM_ERROR" || sum.Failures[0].Calls != 5 {
		t.Errorf("failures %+v", sum.Failures)
	}
}

// A settled hour is reused until its record count changes: a late record
// (a long call written when it ended) is counted.
func TestStatsReusesSettledHours(t *testing.T) {
	ctx := context.Background()
	store, _ := modelstest.Store(t)
	clock := statsClock
	stats := NewStats(StatsDeps{Store: store, Now: func() time.Time { return clock }})
	saveStatCalls(t, store, statCall("file_read", models.StatusSucceeded, "", 5*time.Hour, 3))
	if sum, err := stats.Summary(ctx, StatsQuery{}); err != nil || sum.Calls != 1 {
		t.Fatalf("first summary: %v %+v", err, sum)
	}
	if len(stats.hours) != 24-1 {
		t.Fatalf("%d hours kept, want the 23 settled ones", len(stats.hours))
	}
	saveStatCalls(t, store, statCall("file_read", models.StatusFailed, "TIMEOUT", 5*time.Hour+time.Minute, 9))
	if sum, _ := stats.Summary(ctx, StatsQuery{}); sum.Calls != 1 {
		t.Fatalf("the kept hours were counted again at once: %d calls", sum.Calls)
	}
	clock = clock.Add(statsRecheck)
	sum, err := stats.Summary(ctx, StatsQuery{})
	if err != nil || sum.Calls != 2 || sum.Failed != 1 {
		t.Fatalf("after a late record: %v calls %d failed %d", err, sum.Calls, sum.Failed)
	}
	// An hour with an open call is read again each time.
	saveStatCalls(t, store, &models.Call{ID: "open-1", Tool: "shell_exec", Status: models.StatusQueued, CreatedAt: statsClock.Add(-6 * time.Hour)})
	clock = clock.Add(statsRecheck)
	if sum, _ = stats.Summary(ctx, StatsQuery{}); sum.Open != 1 {
		t.Fatalf("open %d", sum.Open)
	}
	saveStatCalls(t, store, &models.Call{ID: "open-1", Tool: "shell_exec", Status: models.StatusSucceeded, TotalMs: 4, CreatedAt: statsClock.Add(-6 * time.Hour)})
	if sum, _ = stats.Summary(ctx, StatsQuery{}); sum.Open != 0 || sum.Succeeded != 2 {
		t.Fatalf("after the open call ended: open %d succeeded %d", sum.Open, sum.Succeeded)
	}
	if _, err := stats.Summary(ctx, StatsQuery{Hours: 1000}); err == nil {
		t.Fatal("a window of 1000 hours was accepted")
	}
}

func TestLatencyBins(t *testing.T) {
	for _, ms := range []int64{0, 1, 127, 128, 129, 255, 256, 1000, 600_000, 6_600_000} {
		b := latencyBin(ms)
		if hi := binMax(b); hi < ms || float64(hi-ms) > 0.016*float64(ms)+0.5 {
			t.Errorf("%d ms → bin %d up to %d", ms, b, hi)
		}
		if b > 0 && binMax(b-1) >= ms {
			t.Errorf("%d ms: the bin below already reaches %d", ms, binMax(b-1))
		}
	}
}

// BenchmarkDashboardStats computes the dashboard's summary over 100,000
// calls spread over the last 24 hours: "warm" is a page load after the
// first (settled hours reused), "recount" one that also counts the kept
// hours again (once every statsRecheck), "cold" the first one after a
// start.
func BenchmarkDashboardStats(b *testing.B) {
	ctx := context.Background()
	store, err := models.Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	now := time.Now().UTC()
	start := now.Add(-24 * time.Hour)
	const total = 100_000
	codes := []string{"TIMEOUT", "UPSTREAM_ERROR", "VALIDATION_ERROR", "EXECUTION_FAILED"}
	batch := make([]*models.Call, 0, 40)
	for i := range total {
		status, code := models.StatusSucceeded, ""
		if i%13 == 0 {
			status, code = models.StatusFailed, codes[i%len(codes)]
		}
		fin := start.Add(time.Duration(i) * 864 * time.Millisecond)
		batch = append(batch, &models.Call{ID: fmt.Sprintf("%012x%08d", fin.UnixMilli(), i), PrincipalID: 2, SessionID: "bench",
			Tool: fmt.Sprintf("tool_%02d", i%40), Version: "1.0.0", Arguments: `{"path":"notes/today.txt"}`, Status: status, ErrorCode: code,
			Result:   `{"call_id":"x","status":"succeeded","success":true,"data":{"content":"a few lines of a file"}}`,
			Attempts: 1, Cached: i%4 == 0, RunMs: int64(i % 700), TotalMs: int64(i%700 + i%3), CreatedAt: fin, FinishedAt: &fin})
		if len(batch) == cap(batch) {
			if err := store.SaveCalls(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	clock := func() time.Time { return now }
	b.Run("warm", func(b *testing.B) {
		stats := NewStats(StatsDeps{Store: store, Now: clock})
		if _, err := stats.Summary(ctx, StatsQuery{}); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			sum, err := stats.Summary(ctx, StatsQuery{})
			if err != nil || sum.Calls < total-5000 {
				b.Fatal(err, sum.Calls)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	})
	b.Run("recount", func(b *testing.B) {
		at := now
		stats := NewStats(StatsDeps{Store: store, Now: func() time.Time { return at }})
		if _, err := stats.Summary(ctx, StatsQuery{}); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			at = at.Add(statsRecheck) // the kept hours are counted again each time
			if _, err := stats.Summary(ctx, StatsQuery{}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	})
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			sum, err := NewStats(StatsDeps{Store: store, Now: clock}).Summary(ctx, StatsQuery{})
			if err != nil || sum.Calls < total-5000 {
				b.Fatal(err, sum.Calls)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	})
}

// TestStatsRisingNeedsABaseline: a tool failing in the last hour with no
// calls before it is not "rising" (its failures show among the failures
// and in the failure alert instead); refusals never make a tool rise.
func TestStatsRisingNeedsABaseline(t *testing.T) {
	ctx := context.Background()
	store, _ := modelstest.Store(t)
	stats := NewStats(StatsDeps{Store: store, Now: func() time.Time { return statsClock }})
	var calls []*models.Call
	for i := range 8 {
		calls = append(calls, statCall("new_tool", models.StatusFailed, "UPSTREAM_ERROR", time.Duration(i+1)*time.Minute, 5))
		calls = append(calls, statCall("guarded", models.StatusSucceeded, "", 3*time.Hour+time.Duration(i)*time.Minute, 5))
		calls = append(calls, statCall("guarded", models.StatusRefused, "PATH_NOT_ALLOWED", time.Duration(i+1)*time.Minute, 0))
	}
	saveStatCalls(t, store, calls...)
	sum, err := stats.Summary(ctx, StatsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Rising) != 0 {
		t.Errorf("rising %+v, want none: new_tool has no baseline and guarded was only refused", sum.Rising)
	}
	if sum.Failed != 8 || sum.Refused != 8 {
		t.Errorf("failed %d refused %d, want 8 and 8", sum.Failed, sum.Refused)
	}
}
