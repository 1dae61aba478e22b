package invoke

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"toolbelt/internal/leaktest"
	"toolbelt/models"
	"toolbelt/services/embed"
	"toolbelt/services/redact"
	"toolbelt/services/runners"
	"toolbelt/services/tooldef"
)

// TestWithRetries checks the retry loop with a fake sleep: no test sleeps.
func TestWithRetries(t *testing.T) {
	retryable := failure(models.CodeUpstream, "busy", true, "")
	permanent := failure(models.CodeExecutionFailed, "bad", false, "")
	ok := ToolResult{Status: models.StatusSucceeded, Success: true}
	cases := []struct {
		name     string
		results  []ToolResult
		retries  int
		attempts int
		success  bool
		sleeps   []time.Duration // base durations; jitter adds up to 20%
	}{
		{"first try", []ToolResult{ok}, 3, 1, true, nil},
		{"retried once", []ToolResult{retryable, ok}, 3, 2, true, []time.Duration{time.Second}},
		{"permanent failure", []ToolResult{permanent, ok}, 3, 1, false, nil},
		{"retries spent", []ToolResult{retryable, retryable, retryable, retryable, ok}, 3, 4, false, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{"retries disabled", []ToolResult{retryable, ok}, 0, 1, false, nil},
		{"every retry allowed spent", slices.Repeat([]ToolResult{retryable}, tooldef.MaxRetries+1), tooldef.MaxRetries, tooldef.MaxRetries + 1, false,
			[]time.Duration{1 << 0 * time.Second, 1 << 1 * time.Second, 1 << 2 * time.Second, 1 << 3 * time.Second, 1 << 4 * time.Second,
				1 << 5 * time.Second, 1 << 6 * time.Second, 1 << 7 * time.Second, 1 << 8 * time.Second, 1 << 9 * time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var slept []time.Duration
			sleep := func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
			i := 0
			res, n := withRetries(context.Background(), tc.retries, sleep, func() ToolResult { i++; return tc.results[i-1] })
			if n != tc.attempts || res.Success != tc.success || len(slept) != len(tc.sleeps) {
				t.Fatalf("attempts %d success %v sleeps %v; want %d %v %v", n, res.Success, slept, tc.attempts, tc.success, tc.sleeps)
			}
			for k, d := range slept {
				if d < tc.sleeps[k] || d > tc.sleeps[k]*6/5 {
					t.Errorf("sleep %d = %v, want %v plus at most 20%%", k, d, tc.sleeps[k])
				}
			}
		})
	}
	t.Run("cancelled while waiting", func(t *testing.T) {
		sleep := func(ctx context.Context, d time.Duration) error { return context.Canceled }
		res, n := withRetries(context.Background(), 3, sleep, func() ToolResult { return retryable })
		if n != 1 || res.Error.Code != models.CodeCancelled {
			t.Errorf("%d %v", n, res.Error)
		}
	})
	t.Run("cancelled before waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		slept := 0
		sleep := func(ctx context.Context, d time.Duration) error { slept++; return nil }
		res, n := withRetries(ctx, 3, sleep, func() ToolResult { cancel(); return retryable })
		if n != 1 || slept != 0 || res.Error.Code != models.CodeCancelled {
			t.Errorf("%d attempts, %d waits, %v", n, slept, res.Error)
		}
	})
}

// TestPanicBecomesInternal: a panic inside the chain or a tool ends that
// call with INTERNAL, is recorded, and the invoker keeps serving.
func TestPanicBecomesInternal(t *testing.T) {
	ctx := context.Background()
	inv := New(fixtureDeps(t))
	t.Cleanup(func() { inv.Close(ctx) })
	normal := inv.pipeline.run
	inv.pipeline.run = func(context.Context, *call) ToolResult { panic("tool exploded") }
	res := inv.Call(ctx, nil, CallRequest{Tool: "echo_anything", SessionID: "s"})
	if res.Error == nil || res.Error.Code != models.CodeInternal || strings.Contains(res.Error.Message, "exploded") {
		t.Fatalf("panicking call: %+v", res.Error)
	}
	rec, err := inv.CallRecord(ctx, nil, res.CallID)
	if err != nil || rec.ErrorCode != models.CodeInternal {
		t.Fatalf("record of the panicking call: %+v %v", rec, err)
	}
	inv.pipeline.run = normal
	if res := inv.Call(ctx, nil, CallRequest{Tool: "file_list", SessionID: "s"}); !res.Success {
		t.Errorf("the next call failed: %+v", res.Error)
	}
}

// An invoker that never runs (a tool, a test) starts no goroutine for a
// call answered at once, and writes its record before answering; Close
// ends what it holds. (ulule/limiter's memory store, which counts the
// rate limits of one instance, runs a cleaner of its own until it is
// collected, and database/sql watches a transaction on a goroutine that
// may outlive it for a moment: they are not counted.)
func TestInvokerWithoutRun(t *testing.T) {
	ctx := context.Background()
	d := fixtureDeps(t)
	before := leaktest.Take()
	inv := New(d)
	res := inv.Call(ctx, nil, CallRequest{Tool: "echo_anything", SessionID: "s", Arguments: json.RawMessage(`{}`)})
	if res.CallID == "" {
		t.Fatalf("call: %+v", res)
	}
	if rec, err := d.Store.CallByID(ctx, res.CallID); err != nil || rec.Status != res.Status {
		t.Errorf("the record of the call answered %s: %+v %v", res.Status, rec, err)
	}
	for _, stack := range before.Started("ulule/limiter", "database/sql.") {
		t.Errorf("a goroutine started:\n%s", stack)
	}
	inv.Close(ctx)
}

// fixtureDeps are an invoker's over the catalog fixture, its selector and
// no secrets to redact.
func fixtureDeps(t *testing.T) Deps {
	t.Helper()
	store, authz := catalogFixture(t)
	red, err := redact.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	sel := newFixtureSelector(t, store, authz, embed.NewBuiltin(), 0)
	return Deps{Store: store, Selector: sel, Authz: authz, Redactor: red, Runners: runners.NewTable(runners.Deps{DataDir: t.TempDir(), Log: quiet}),
		DataDir: t.TempDir(), Log: quiet}
}
