package invoke

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
	"toolbelt/models"
	"toolbelt/services/cluster"
	"toolbelt/services/tooldef"
)

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
		return ToolResult{Status: models.StatusSucceeded, Success: true}
	})
	shell := func() *call { return &call{def: tooldef.Definition{Category: "shell"}} }
	var wg sync.WaitGroup
	results := make([]ToolResult, 4)
	for i := range 2 {
		wg.Go(func() { results[i] = step(context.Background(), shell()) })
	}
	waitFor(t, func() bool { return running.Load() == 2 })
	// The third waits; the fourth finds the waiting list full.
	ctx, cancel := context.WithCancel(context.Background())
	wg.Go(func() { results[2] = step(ctx, shell()) })
	waitFor(t, func() bool { return inv.queues.of("shell").waiting.Load() == 1 })
	if res := step(context.Background(), shell()); res.Error == nil || res.Error.Code != models.CodeQueueFull || res.Error.RetryAfter == 0 {
		t.Fatalf("fourth call: %+v", res)
	}
	cancel()
	waitFor(t, func() bool { return inv.queues.of("shell").waiting.Load() == 0 })
	// A waiter that gets a slot runs, and its wait is measured.
	waiter := shell()
	wg.Go(func() { results[3] = step(context.Background(), waiter) })
	waitFor(t, func() bool { return inv.queues.of("shell").waiting.Load() == 1 })
	time.Sleep(30 * time.Millisecond)
	close(release)
	wg.Wait()
	if !results[3].Success || waiter.queueMs < 30 {
		t.Errorf("waiter: %+v after %d ms in the queue (held at least 30 ms)", results[3], waiter.queueMs)
	}
	if results[2].Error == nil || results[2].Error.Code != models.CodeCancelled {
		t.Errorf("cancelled waiter: %+v", results[2])
	}
	if !results[0].Success || !results[1].Success || peak.Load() != 2 {
		t.Errorf("runs %v %v, peak %d (limit 2)", results[0].Success, results[1].Success, peak.Load())
	}
	// Another category is not held up by a full one.
	if cq := inv.queues.of("filesystem"); cq.limit != DefaultQueueLimits()["filesystem"] {
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

// TestSharedQueueGuard runs the queue guard over queues shared in a real
// Redis: its refusals answer as the in-process queue's do (QUEUE_FULL
// with Retry-After past the waiting bound, CANCELLED for a waiter whose
// context ends), the cancelled waiter's place is given back, and so is
// the slot of a running call cancelled on its instance.
func TestSharedQueueGuard(t *testing.T) {
	client, err := cluster.OpenRedis(context.Background(), dbtest.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	shared := cluster.RedisQueues(client, nil, quiet)
	inv := &Invoker{queues: newQueues(map[string]int{"shell": 1}, 1), log: quiet}
	inv.queues.shared = shared
	release := make(chan struct{})
	step := inv.queue(func(ctx context.Context, c *call) ToolResult {
		if c.id == "runs-until-cancelled" {
			<-ctx.Done()
			return cancelledWaiting()
		}
		<-release
		return ToolResult{Status: models.StatusSucceeded, Success: true}
	})
	shell := func() *call { return &call{def: tooldef.Definition{Category: "shell"}} }
	depth := func(holding, waiting int64) func() bool {
		return func() bool {
			h, w, err := shared.Depth(context.Background(), "shell")
			return err == nil && h == holding && w == waiting
		}
	}
	results := make(chan ToolResult, 3)
	go func() { results <- step(context.Background(), shell()) }()
	waitFor(t, depth(1, 0))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { results <- step(ctx, shell()) }()
	waitFor(t, depth(1, 1))
	if res := step(context.Background(), shell()); res.Error == nil || res.Error.Code != models.CodeQueueFull || res.Error.RetryAfter != 2 {
		t.Fatalf("past the waiting bound: %+v", res)
	}
	cancel()
	if res := <-results; res.Error == nil || res.Error.Code != models.CodeCancelled {
		t.Fatalf("cancelled waiter: %+v", res)
	}
	waitFor(t, depth(1, 0))
	waiter := shell()
	go func() { results <- step(context.Background(), waiter) }()
	waitFor(t, depth(1, 1))
	close(release)
	for range 2 {
		if res := <-results; !res.Success {
			t.Errorf("a call that held a slot: %+v", res)
		}
	}
	waitFor(t, depth(0, 0))
	// A running call cancelled on its instance gives its slot back.
	ctx, cancel = context.WithCancel(context.Background())
	running := shell()
	running.id = "runs-until-cancelled"
	go func() { results <- step(ctx, running) }()
	waitFor(t, depth(1, 0))
	cancel()
	<-results
	waitFor(t, depth(0, 0))
}

// BenchmarkQueueGuard measures the in-process queue guard alone around a
// step that does nothing, with a free slot (the path of every call on
// one instance).
func BenchmarkQueueGuard(b *testing.B) {
	inv := &Invoker{queues: newQueues(nil, 0)}
	step := inv.queue(func(ctx context.Context, c *call) ToolResult { return ToolResult{Success: true} })
	c := &call{def: tooldef.Definition{Category: "shell"}}
	ctx := context.Background()
	for b.Loop() {
		step(ctx, c)
	}
}
