package invoke

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/poll"
	"toolbelt/models"
	"toolbelt/services/cluster"
	"toolbelt/services/tooldef"
)

// TestQueueGuard runs calls through the queue guard alone with a step that
// blocks: the limit holds, the waiting list is bounded, and a call
// cancelled while waiting leaves.
func TestQueueGuard(t *testing.T) {
	inv := &Invoker{admission: admission{queues: newQueues(map[string]int{"shell": 2}, 1, 0)}}
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
	poll.True(t, 10*time.Second, "running.Load() == 2", func() bool { return running.Load() == 2 })
	// The third waits; the fourth finds the waiting list full.
	ctx, cancel := context.WithCancel(context.Background())
	wg.Go(func() { results[2] = step(ctx, shell()) })
	poll.True(t, 10*time.Second, "waitingIn(inv.admission.queues.of(\"shell\")) == 1", func() bool { return waitingIn(inv.admission.queues.of("shell")) == 1 })
	if res := step(context.Background(), shell()); res.Error == nil || res.Error.Code != models.CodeQueueFull || res.Error.RetryAfter == 0 {
		t.Fatalf("fourth call: %+v", res)
	}
	cancel()
	poll.True(t, 10*time.Second, "waitingIn(inv.admission.queues.of(\"shell\")) == 0", func() bool { return waitingIn(inv.admission.queues.of("shell")) == 0 })
	// A waiter that gets a slot runs, and its wait is measured.
	waiter := shell()
	wg.Go(func() { results[3] = step(context.Background(), waiter) })
	poll.True(t, 10*time.Second, "waitingIn(inv.admission.queues.of(\"shell\")) == 1", func() bool { return waitingIn(inv.admission.queues.of("shell")) == 1 })
	time.Sleep(30 * time.Millisecond)
	close(release)
	wg.Wait()
	if !results[3].Success || waiter.timing.queueMs < 30 {
		t.Errorf("waiter: %+v after %d ms in the queue (held at least 30 ms)", results[3], waiter.timing.queueMs)
	}
	if results[2].Error == nil || results[2].Error.Code != models.CodeCancelled {
		t.Errorf("cancelled waiter: %+v", results[2])
	}
	if !results[0].Success || !results[1].Success || peak.Load() != 2 {
		t.Errorf("runs %v %v, peak %d (limit 2)", results[0].Success, results[1].Success, peak.Load())
	}
	// Another category is not held up by a full one.
	if cq := inv.admission.queues.of("filesystem"); cq.limit != DefaultQueueLimits()["filesystem"] {
		t.Errorf("filesystem limit %d", cq.limit)
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
	inv := &Invoker{log: quiet, admission: admission{queues: newQueues(map[string]int{"shell": 1}, 1, 0)}}
	inv.admission.queues.shared = shared
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
	poll.True(t, 10*time.Second, "1 holding and 0 waiting", depth(1, 0))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { results <- step(ctx, shell()) }()
	poll.True(t, 10*time.Second, "1 holding and 1 waiting", depth(1, 1))
	if res := step(context.Background(), shell()); res.Error == nil || res.Error.Code != models.CodeQueueFull || res.Error.RetryAfter != 2 {
		t.Fatalf("past the waiting bound: %+v", res)
	}
	cancel()
	if res := <-results; res.Error == nil || res.Error.Code != models.CodeCancelled {
		t.Fatalf("cancelled waiter: %+v", res)
	}
	poll.True(t, 10*time.Second, "1 holding and 0 waiting", depth(1, 0))
	waiter := shell()
	go func() { results <- step(context.Background(), waiter) }()
	poll.True(t, 10*time.Second, "1 holding and 1 waiting", depth(1, 1))
	close(release)
	for range 2 {
		if res := <-results; !res.Success {
			t.Errorf("a call that held a slot: %+v", res)
		}
	}
	poll.True(t, 10*time.Second, "0 holding and 0 waiting", depth(0, 0))
	// A running call cancelled on its instance gives its slot back.
	ctx, cancel = context.WithCancel(context.Background())
	running := shell()
	running.id = "runs-until-cancelled"
	go func() { results <- step(ctx, running) }()
	poll.True(t, 10*time.Second, "1 holding and 0 waiting", depth(1, 0))
	cancel()
	<-results
	poll.True(t, 10*time.Second, "0 holding and 0 waiting", depth(0, 0))
}

// BenchmarkQueueGuard measures the in-process queue guard alone around a
// step that does nothing, with a free slot (the path of every call on
// one instance).
func BenchmarkQueueGuard(b *testing.B) {
	inv := &Invoker{admission: admission{queues: newQueues(nil, 0, 0)}}
	step := inv.queue(func(ctx context.Context, c *call) ToolResult { return ToolResult{Success: true} })
	c := &call{def: tooldef.Definition{Category: "shell"}}
	ctx := context.Background()
	for b.Loop() {
		step(ctx, c)
	}
}

// waitingIn counts the calls waiting in cq (and the places reserved).
func waitingIn(cq *categoryQueue) int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.waitCount
}

// flooded is a category queue under a flood: each call of the step under
// test blocks until released by id, and the ids are admitted in order.
type flooded struct {
	inv      *Invoker
	step     step
	admitted chan string
	mu       sync.Mutex
	release  map[string]chan struct{}
}

func newFlooded(limit, maxWait, maxWaitEach int) *flooded {
	f := &flooded{inv: &Invoker{log: quiet, admission: admission{queues: newQueues(map[string]int{"code": limit}, maxWait, maxWaitEach)}},
		admitted: make(chan string, 64), release: map[string]chan struct{}{}}
	f.step = f.inv.queue(func(ctx context.Context, c *call) ToolResult {
		f.admitted <- c.id
		<-f.gate(c.id)
		return ToolResult{Status: models.StatusSucceeded, Success: true}
	})
	return f
}

func (f *flooded) gate(id string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, ok := f.release[id]
	if !ok {
		ch = make(chan struct{})
		f.release[id] = ch
	}
	return ch
}

// codeCall is a call of principal id in the code category.
func codeCall(id string, principal uint) *call {
	return &call{id: id, caller: &models.Principal{ID: principal}, def: tooldef.Definition{Category: "code"}}
}

// A flood principal fills the code category (2 running, 6 waiting); the
// victim's call, last to arrive, runs at the first free slot, before the
// flood's waiters; the flood's own waiting bound refuses its excess with
// QUEUE_FULL saying so, while the victim still gets a place.
func TestQueueFairAcrossPrincipals(t *testing.T) {
	const flood, victim = 1, 2
	f := newFlooded(2, 64, 8)
	results := make(chan ToolResult, 32)
	run := func(c *call) { go func() { results <- f.step(context.Background(), c) }() }
	for i := range 8 {
		run(codeCall(fmt.Sprintf("f%d", i), flood))
		if i < 2 {
			<-f.admitted
		} else {
			poll.True(t, 10*time.Second, "waitingIn(f.inv.admission.queues.of(\"code\")) == i-1", func() bool { return waitingIn(f.inv.admission.queues.of("code")) == i-1 })
		}
	}
	run(codeCall("v", victim))
	poll.True(t, 10*time.Second, "waitingIn(f.inv.admission.queues.of(\"code\")) == 7", func() bool { return waitingIn(f.inv.admission.queues.of("code")) == 7 })
	close(f.gate("f0"))
	<-results
	next := <-f.admitted
	t.Logf("at the first free slot, %s runs (the victim waited behind %d of the flood's calls)", next,
		map[bool]int{true: 0, false: 6}[next == "v"])
	if next != "v" {
		t.Fatalf("the first free slot went to %s; want the victim's call", next)
	}
	// The flood has 6 waiting: 2 more reach its bound of 8.
	for i, id := range []string{"f8", "f9"} { // one after the other: their order is the flood's
		run(codeCall(id, flood))
		poll.True(t, 10*time.Second, "waitingIn(f.inv.admission.queues.of(\"code\")) == 7+i", func() bool { return waitingIn(f.inv.admission.queues.of("code")) == 7+i })
	}
	res := f.step(context.Background(), codeCall("f10", flood))
	if res.Error == nil || res.Error.Code != models.CodeQueueFull || res.Error.RetryAfter == 0 || !strings.Contains(res.Error.Message, "you have 8 code calls waiting") {
		t.Fatalf("the flood past its bound: %+v", res.Error)
	}
	run(codeCall("v2", victim))
	poll.True(t, 10*time.Second, "waitingIn(f.inv.admission.queues.of(\"code\")) == 9", func() bool { return waitingIn(f.inv.admission.queues.of("code")) == 9 })
	// The flood's order holds among its calls; while the victim's first
	// call holds one of the two slots, the flood has the other, and the
	// victim's second call runs when its first ends.
	var order []string
	for _, id := range []string{"f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9", "v", "v2"} {
		close(f.gate(id))
		<-results
		if len(order) < 9 {
			order = append(order, <-f.admitted)
		}
	}
	if want := []string{"f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9", "v2"}; !slices.Equal(order, want) {
		t.Errorf("admitted %v; want %v", order, want)
	}
}

// An async call reserves its place when it is submitted: past the
// caller's bound it is refused then (QUEUE_FULL), another principal is
// not; a reserved call that reaches the queue is not refused again, and a
// reservation given up frees its place.
func TestQueueReservedAtSubmission(t *testing.T) {
	const flood, victim = 1, 2
	f := newFlooded(1, 64, 2)
	ctx := context.Background()
	results := make(chan ToolResult, 8)
	go func() { results <- f.step(ctx, codeCall("running", flood)) }()
	<-f.admitted
	for _, id := range []string{"a1", "a2"} {
		if res := f.inv.reserve(ctx, codeCall(id, flood)); res != nil {
			t.Fatalf("%s: %+v", id, res.Error)
		}
	}
	if res := f.inv.reserve(ctx, codeCall("a3", flood)); res == nil || res.Error.Code != models.CodeQueueFull {
		t.Fatalf("the flood's third async call past its bound of 2 was accepted")
	}
	if res := f.inv.reserve(ctx, codeCall("v", victim)); res != nil {
		t.Fatalf("the victim's async call: %+v", res.Error)
	}
	// a1 reaches the queue: it converts its place, it is not refused.
	go func() { results <- f.step(ctx, codeCall("a1", flood)) }()
	poll.True(t, 10*time.Second, "a1 no longer reserved", func() bool {
		f.inv.admission.queues.mu.Lock()
		defer f.inv.admission.queues.mu.Unlock()
		_, still := f.inv.admission.queues.reserved["a1"]
		return !still
	})
	if n := waitingIn(f.inv.admission.queues.of("code")); n != 3 {
		t.Fatalf("%d waiting or reserved; want 3 (a1 waiting, a2 and v reserved)", n)
	}
	// a2 ended before it queued (a guard refused it): its place is free.
	f.inv.unreserve("a2")
	if res := f.inv.reserve(ctx, codeCall("a4", flood)); res != nil {
		t.Fatalf("a place given up was not freed: %+v", res.Error)
	}
	f.inv.unreserve("a4")
	f.inv.unreserve("v")
	close(f.gate("running"))
	close(f.gate("a1"))
	for range 2 {
		if res := <-results; !res.Success {
			t.Errorf("%+v", res)
		}
	}
	<-f.admitted
	if n := waitingIn(f.inv.admission.queues.of("code")); n != 0 {
		t.Errorf("%d left waiting", n)
	}
}

// BenchmarkQueueVictimUnderFlood measures the victim's wait in the code
// category (limit 4) under a flood principal's 68 calls of 2 ms each (4
// running, 64 waiting) when its call arrives: victim-ms is the time from
// the flood's start to the victim's call running.
func BenchmarkQueueVictimUnderFlood(b *testing.B) {
	const flood, victim = 1, 2
	var waited time.Duration
	for b.Loop() {
		inv := &Invoker{log: quiet, admission: admission{queues: newQueues(map[string]int{"code": 4}, 128, 128)}}
		gate := make(chan struct{})
		ran := make(chan struct{})
		step := inv.queue(func(ctx context.Context, c *call) ToolResult {
			if c.caller.ID == victim {
				close(ran)
				return ToolResult{Success: true}
			}
			<-gate
			time.Sleep(2 * time.Millisecond) // the flood's tool at work
			return ToolResult{Success: true}
		})
		var wg sync.WaitGroup
		for i := range 68 {
			wg.Go(func() { step(context.Background(), codeCall(fmt.Sprintf("f%d", i), flood)) })
		}
		for waitingIn(inv.admission.queues.of("code")) < 64 {
			time.Sleep(100 * time.Microsecond)
		}
		wg.Go(func() { step(context.Background(), codeCall("v", victim)) })
		for waitingIn(inv.admission.queues.of("code")) < 65 {
			time.Sleep(100 * time.Microsecond)
		}
		start := time.Now()
		close(gate)
		<-ran
		waited += time.Since(start)
		wg.Wait()
	}
	b.ReportMetric(float64(waited.Microseconds())/1000/float64(b.N), "victim-ms")
}
