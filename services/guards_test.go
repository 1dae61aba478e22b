package services

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWithRetries checks the retry loop with a fake sleep: no test sleeps.
func TestWithRetries(t *testing.T) {
	retryable := failure(CodeTimeout, "slow", true, "")
	permanent := failure(CodeExecutionFailed, "bad", false, "")
	ok := ToolResult{Status: StatusSucceeded, Success: true}
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
		if n != 1 || res.Error.Code != CodeCancelled {
			t.Errorf("%d %v", n, res.Error)
		}
	})
}

// TestQueueGuard runs calls through the queue guard alone with a step that
// blocks: the limit holds, the waiting list is bounded, and a call
// cancelled while waiting leaves.
func TestQueueGuard(t *testing.T) {
	inv := &Invoker{queues: newQueues(map[string]int{"shell": 2}, 1)}
	release := make(chan struct{})
	var running, peak atomic.Int64
	step := inv.queue(func(ctx context.Context, c *call) ToolResult {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release
		running.Add(-1)
		return ToolResult{Status: StatusSucceeded, Success: true}
	})
	shell := &call{def: ToolDefinition{Category: "shell"}}
	var wg sync.WaitGroup
	results := make([]ToolResult, 3)
	for i := range 2 {
		wg.Go(func() { results[i] = step(context.Background(), shell) })
	}
	waitFor(t, func() bool { return running.Load() == 2 })
	// The third waits; the fourth finds the waiting list full.
	ctx, cancel := context.WithCancel(context.Background())
	wg.Go(func() { results[2] = step(ctx, shell) })
	waitFor(t, func() bool { return inv.queues.of("shell").waiting.Load() == 1 })
	if res := step(context.Background(), shell); res.Error == nil || res.Error.Code != CodeQueueFull || res.Error.RetryAfter == 0 {
		t.Fatalf("fourth call: %+v", res)
	}
	cancel()
	waitFor(t, func() bool { return inv.queues.of("shell").waiting.Load() == 0 })
	close(release)
	wg.Wait()
	if results[2].Error == nil || results[2].Error.Code != CodeCancelled {
		t.Errorf("cancelled waiter: %+v", results[2])
	}
	if !results[0].Success || !results[1].Success || peak.Load() != 2 {
		t.Errorf("runs %v %v, peak %d (limit 2)", results[0].Success, results[1].Success, peak.Load())
	}
	// Another category is not held up by a full one.
	if cq := inv.queues.of("filesystem"); cq.limit != DefaultQueueLimits["filesystem"] {
		t.Errorf("filesystem limit %d", cq.limit)
	}
}

// waitFor polls cond until it holds (a bounded wait for goroutines to
// reach a state, not a timing assertion).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}
