package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/poll"
	"toolbelt/models"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// runNotices runs n until the test ends (before the cleanups registered
// earlier, which close it).
func runNotices(t testing.TB, n *Notices) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// queueBackends make, per engine, instances of shared queues over one
// real server: each has its own connection and its own notices, as
// separate processes would.
var queueBackends = []struct {
	name string
	open func(t testing.TB) func(t testing.TB) *Queues
}{
	{"redis", func(t testing.TB) func(t testing.TB) *Queues {
		url := dbtest.Redis(t)
		return func(t testing.TB) *Queues {
			client, err := OpenRedis(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			n, err := RedisNotices(context.Background(), client, quiet)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Close(); _ = client.Close() })
			runNotices(t, n)
			return RedisQueues(client, n, quiet)
		}
	}},
	{"postgres", func(t testing.TB) func(t testing.TB) *Queues {
		url := dbtest.Postgres(t)
		return func(t testing.TB) *Queues {
			store, err := models.OpenPostgres(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			n, err := PostgresNotices(context.Background(), url, quiet)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Close(); _ = store.Close() })
			runNotices(t, n)
			return StoreQueues(store, n, quiet)
		}
	}},
}

// eachQueueBackend runs fn on Redis and on Postgres with k instances.
func eachQueueBackend(t *testing.T, k int, fn func(t *testing.T, qs []*Queues)) {
	for _, b := range queueBackends {
		t.Run(b.name, func(t *testing.T) {
			instance := b.open(t)
			qs := make([]*Queues, k)
			for i := range qs {
				qs[i] = instance(t)
			}
			fn(t, qs)
		})
	}
}

// depthIs waits until the cluster counts holding and waiting calls.
func depthIs(t *testing.T, q *Queues, category string, holding, waiting int64) {
	t.Helper()
	var h, w int64
	poll.True(t, 20*time.Second, fmt.Sprintf("%d holding and %d waiting", holding, waiting), func() bool {
		var err error
		h, w, err = q.Depth(context.Background(), category)
		if err != nil {
			t.Fatal(err)
		}
		return h == holding && w == waiting
	})
}

// host measures, on the host, what runs: how many hold a slot at once
// (the peak), and the order they were admitted in.
type host struct {
	mu            sync.Mutex
	running, peak int
	order         []int
	admitted      chan int
	release       []chan struct{}
	errs          []error
}

func newHost(n int) *host {
	h := &host{admitted: make(chan int, n), errs: make([]error, n)}
	for range n {
		h.release = append(h.release, make(chan struct{}))
	}
	return h
}

// call acquires a slot on q as call i, holds it until released, and
// gives it back.
func (h *host) call(ctx context.Context, q *Queues, i, limit, maxWait int) {
	slot, err := q.Acquire(ctx, Ask{Category: "shell", Limit: limit, MaxWait: maxWait}, nil)
	if err != nil {
		h.errs[i] = err
		h.admitted <- -1
		return
	}
	h.mu.Lock()
	h.running++
	h.peak = max(h.peak, h.running)
	h.order = append(h.order, i)
	h.mu.Unlock()
	h.admitted <- i
	<-h.release[i]
	h.mu.Lock()
	h.running--
	h.mu.Unlock()
	slot.Release()
}

// With a limit of N, N+k calls of one category spread over three
// instances run at most N at a time in the cluster, all of them, and the
// waiters are admitted in the order they arrived whichever instance took
// them: each arrives once the one before it is counted, and holders leave
// one at a time, so each admission is the queue's one decision.
func TestSharedQueueLimitAndOrder(t *testing.T) {
	eachQueueBackend(t, 3, func(t *testing.T, qs []*Queues) {
		const limit, calls = 2, 9
		h := newHost(calls)
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() { h.call(context.Background(), qs[i%len(qs)], i, limit, 64) })
			depthIs(t, qs[(i+1)%len(qs)], "shell", int64(min(i+1, limit)), int64(max(0, i+1-limit)))
		}
		for range limit {
			<-h.admitted
		}
		for i := range calls {
			close(h.release[i]) // the oldest holder leaves; the next waiter comes in
			if i+limit < calls {
				if got := <-h.admitted; got != i+limit {
					t.Fatalf("admitted call %d after %v; want %d", got, h.order, i+limit)
				}
			}
		}
		wg.Wait()
		if h.peak != limit || len(h.order) != calls || !slices.IsSorted(h.order) {
			t.Errorf("peak %d (limit %d), admitted %v", h.peak, limit, h.order)
		}
		for i, err := range h.errs {
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		}
		depthIs(t, qs[0], "shell", 0, 0)
	})
}

// Released all at once, many calls over three instances still never run
// more than the limit at a time, and every one of them runs.
func TestSharedQueueUnderContention(t *testing.T) {
	eachQueueBackend(t, 3, func(t *testing.T, qs []*Queues) {
		const limit, calls = 3, 30
		var mu sync.Mutex
		running, peak, done := 0, 0, 0
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				slot, err := qs[i%len(qs)].Acquire(context.Background(), Ask{Category: "shell", Limit: limit, MaxWait: calls}, nil)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				running++
				peak = max(peak, running)
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
				mu.Lock()
				running--
				done++
				mu.Unlock()
				slot.Release()
			})
		}
		wg.Wait()
		if peak > limit || done != calls {
			t.Errorf("peak %d (limit %d), %d of %d ran", peak, limit, done, calls)
		}
		depthIs(t, qs[0], "shell", 0, 0)
	})
}

// The waiting bound holds in the cluster: with one slot held on A and
// the list full of waiters on B and C, a call on A is refused QUEUE_FULL;
// once a waiter leaves, there is room again.
func TestSharedQueueFullInTheCluster(t *testing.T) {
	eachQueueBackend(t, 3, func(t *testing.T, qs []*Queues) {
		a, b, c := qs[0], qs[1], qs[2]
		held, err := a.Acquire(context.Background(), Ask{Category: "shell", Limit: 1, MaxWait: 2}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctxB, cancelB := context.WithCancel(context.Background())
		errs := make(chan error, 3)
		for _, on := range []struct {
			q   *Queues
			ctx context.Context
		}{{b, ctxB}, {c, context.Background()}} {
			go func() {
				slot, err := on.q.Acquire(on.ctx, Ask{Category: "shell", Limit: 1, MaxWait: 2}, nil)
				if err == nil {
					slot.Release()
				}
				errs <- err
			}()
		}
		depthIs(t, a, "shell", 1, 2)
		_, err = a.Acquire(context.Background(), Ask{Category: "shell", Limit: 1, MaxWait: 2}, nil)
		if !errors.Is(err, models.ErrQueueFull) || models.CodeOf(err) != models.CodeQueueFull {
			t.Fatalf("a third waiter: %v; want QUEUE_FULL", err)
		}
		cancelB()
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled waiter: %v", err)
		}
		depthIs(t, a, "shell", 1, 1)
		go func() {
			slot, err := a.Acquire(context.Background(), Ask{Category: "shell", Limit: 1, MaxWait: 2}, nil)
			if err == nil {
				slot.Release()
			}
			errs <- err
		}()
		depthIs(t, b, "shell", 1, 2)
		held.Release()
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		depthIs(t, c, "shell", 0, 0)
	})
}

// A waiter cancelled on its instance leaves at once and gives its ticket
// up: the waiter behind it is next, and afterwards the full limit runs at
// once again (no ticket or slot leaked).
func TestSharedQueueCancelledWaiterLeaves(t *testing.T) {
	eachQueueBackend(t, 2, func(t *testing.T, qs []*Queues) {
		a, b := qs[0], qs[1]
		const limit = 2
		var held []*Slot
		for range limit {
			s, err := a.Acquire(context.Background(), Ask{Category: "shell", Limit: limit, MaxWait: 8}, nil)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, s)
		}
		ctx, cancel := context.WithCancel(context.Background())
		first := make(chan error, 1)
		go func() {
			s, err := b.Acquire(ctx, Ask{Category: "shell", Limit: limit, MaxWait: 8}, nil)
			if err == nil {
				s.Release()
			}
			first <- err
		}()
		depthIs(t, a, "shell", limit, 1)
		second := make(chan *Slot, 1)
		go func() {
			s, err := a.Acquire(context.Background(), Ask{Category: "shell", Limit: limit, MaxWait: 8}, nil)
			if err != nil {
				t.Error(err)
			}
			second <- s
		}()
		depthIs(t, b, "shell", limit, 2)
		cancel()
		if err := <-first; !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled waiter: %v", err)
		}
		depthIs(t, b, "shell", limit, 1)
		held[0].Release()
		s := <-second
		if s == nil {
			t.Fatal("the second waiter got no slot")
		}
		s.Release()
		held[1].Release()
		depthIs(t, a, "shell", 0, 0)
		for _, q := range []*Queues{b, a} {
			var again []*Slot
			for range limit {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				s, err := q.Acquire(ctx, Ask{Category: "shell", Limit: limit, MaxWait: 0}, nil) // maxWait 0: only a free slot will do
				cancel()
				if err != nil {
					t.Fatalf("the limit does not run at once afterwards: %v", err)
				}
				again = append(again, s)
			}
			for _, s := range again {
				s.Release()
			}
		}
	})
}

// An instance that dies holding a slot (its renewals stop, nothing is
// released) frees it within the lease: the waiter on another instance
// runs. A holder that lives keeps its slot past many leases, and a place
// in line whose instance died lapses too, so the waiter behind it is not
// held up by it.
func TestSharedQueueDeadInstanceFreesItsSlot(t *testing.T) {
	eachQueueBackend(t, 2, func(t *testing.T, qs []*Queues) {
		const lease, renew = time.Second, 100 * time.Millisecond
		a, b := qs[0], qs[1]
		a.lease, a.renew = lease, renew // the times of QueueLease and QueueRenew, shortened
		b.lease, b.renew = lease, renew
		live, err := a.Acquire(context.Background(), Ask{Category: "shell", Limit: 1, MaxWait: 8}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// A place in line whose instance dies at once: asked for, never renewed.
		ctx := context.Background()
		dead := models.SlotRequest{Category: "shell", Token: "dead-waiter", Limit: 1, MaxWait: 8, Lease: 2 * lease, Now: time.Now()}
		if got, err := a.backend.take(ctx, dead); err != nil || got != models.SlotWaiting {
			t.Fatalf("dead waiter: %v %v", got, err)
		}
		got := make(chan *Slot, 1)
		go func() {
			s, err := b.Acquire(ctx, Ask{Category: "shell", Limit: 1, MaxWait: 8}, nil)
			if err != nil {
				t.Error(err)
			}
			got <- s
		}()
		depthIs(t, b, "shell", 1, 2)
		depthIs(t, b, "shell", 1, 1) // the dead place lapsed
		// Three leases pass while the holder renews: nothing marks "a
		// lease would have lapsed" but time itself, so this cannot be a
		// condition.
		const pastLapse = 3 * lease
		time.Sleep(pastLapse) // renewed all along: the slot stays held
		select {
		case <-got:
			t.Fatal("a slot renewed by a live instance was given away")
		default:
		}
		live.abandon() // the instance dies
		began := time.Now()
		s := <-got
		if s == nil {
			t.FailNow()
		}
		t.Logf("the dead instance's slot was free after %s (lease %s)", time.Since(began).Round(time.Millisecond), lease)
		s.Release()
		depthIs(t, a, "shell", 0, 0)
	})
}

// The queue's decisions, step by step on one backend with nobody polling
// behind the test's back: a newcomer never passes a waiter (not even when
// a slot is free before the waiter asks again), waiters are admitted by
// ticket as slots free, the waiting bound counts waiters only, and a
// release of what is not held changes nothing.
func TestSharedQueueDecisions(t *testing.T) {
	steps := []decision{
		{"h1", "", "take", models.SlotHeld},
		{"h2", "", "take", models.SlotHeld},
		{"w1", "", "take", models.SlotWaiting},
		{"w2", "", "take", models.SlotWaiting},
		{"full", "", "take", models.SlotFull}, // two wait: the bound
		{"h1", "", "release", 0},
		{"late", "", "take", models.SlotFull},  // a slot is free, but w1 and w2 wait: no barging, and the list is full
		{"w2", "", "take", models.SlotWaiting}, // w1 is first
		{"w1", "", "take", models.SlotHeld},
		{"w2", "", "take", models.SlotWaiting}, // both slots held again
		{"late", "", "take", models.SlotWaiting},
		{"h2", "", "release", 0},
		{"late", "", "take", models.SlotWaiting}, // behind w2
		{"w2", "", "take", models.SlotHeld},
		{"w2", "", "take", models.SlotHeld}, // asking again while holding keeps it
		{"nobody", "", "release", 0},
		{"late", "", "take", models.SlotWaiting},
		{"late", "", "release", 0}, // leaves the line
		{"w1", "", "release", 0},
		{"next", "", "take", models.SlotHeld}, // nobody waits, a slot is free
	}
	eachQueueBackend(t, 1, func(t *testing.T, qs []*Queues) {
		play(t, qs[0], models.SlotRequest{Limit: 2, MaxWait: 2}, steps)
		if h, w, err := qs[0].Depth(context.Background(), "code"); err != nil || h != 2 || w != 0 {
			t.Errorf("depth %d holding, %d waiting, %v; want 2, 0", h, w, err)
		}
	})
}

// decision is a step of a queue's decisions: token of principal takes
// (wanting want) or releases.
type decision struct {
	token, principal string
	op               string // take, release
	want             models.Admission
}

// play takes the steps in the code category of q's backend with the
// bounds of r, failing at the first decision not wanted.
func play(t *testing.T, q *Queues, r models.SlotRequest, steps []decision) {
	t.Helper()
	ctx := context.Background()
	for i, s := range steps {
		if s.op == "release" {
			if err := q.backend.release(ctx, "code", s.token); err != nil {
				t.Fatal(err)
			}
			continue
		}
		r.Category, r.Token, r.Principal, r.Lease, r.Now = "code", s.token, s.principal, time.Minute, time.Now()
		got, err := q.backend.take(ctx, r)
		if err != nil || got != s.want {
			t.Fatalf("step %d, %s of %q takes: %v %v; want %v", i, s.token, s.principal, got, err, s.want)
		}
	}
}

// BenchmarkSharedQueue measures acquiring and releasing a free slot of a
// shared queue, one instance and one caller at a time (the cost a call
// pays in the queue guard when nobody waits): on Redis, two scripts; on
// Postgres, a transaction and a delete, plus the wake-up NOTIFY.
func BenchmarkSharedQueue(b *testing.B) {
	for _, be := range queueBackends {
		b.Run(be.name, func(b *testing.B) {
			q := be.open(b)(b)
			ctx := context.Background()
			for b.Loop() {
				s, err := q.Acquire(ctx, Ask{Category: "shell", Limit: 5, MaxWait: 64}, nil)
				if err != nil {
					b.Fatal(err)
				}
				s.Release()
			}
		})
	}
}

// A slot whose lease lapsed while its call still ran (its instance was
// paused past the lease) is no longer counted, and its next renewal takes
// it back, so the count is true to what runs again; a lapsed place in
// line is dropped for good.
func TestSharedQueueLapsedSlotTakenBack(t *testing.T) {
	eachQueueBackend(t, 1, func(t *testing.T, qs []*Queues) {
		ctx := context.Background()
		b := qs[0].backend
		for _, token := range []string{"paused-holder", "paused-waiter"} {
			r := models.SlotRequest{Category: "api", Token: token, Limit: 1, MaxWait: 4, Lease: 200 * time.Millisecond, Now: time.Now()}
			if _, err := b.take(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		depthIs(t, qs[0], "api", 0, 0) // both leases have lapsed, nothing swept them yet
		held, err := b.renew(ctx, "api", "paused-holder", "", time.Minute)
		if err != nil || held {
			t.Fatalf("renewing a lapsed slot: %v %v; want taken back", held, err)
		}
		depthIs(t, qs[0], "api", 1, 0)
		if held, err := b.renew(ctx, "api", "paused-holder", "", time.Minute); err != nil || !held {
			t.Fatalf("renewing a held slot: %v %v", held, err)
		}
		// The slot is held: a newcomer waits.
		r := models.SlotRequest{Category: "api", Token: "newcomer", Limit: 1, MaxWait: 4, Lease: time.Minute, Now: time.Now()}
		if got, err := b.take(ctx, r); err != nil || got != models.SlotWaiting {
			t.Fatalf("a newcomer: %v %v", got, err)
		}
	})
}

// BenchmarkSharedQueueContended measures acquire and release with 24
// callers over three instances competing for 4 slots (so most wait and are
// woken by releases): the time per acquire and release, over all callers.
func BenchmarkSharedQueueContended(b *testing.B) {
	for _, be := range queueBackends {
		b.Run(be.name, func(b *testing.B) {
			instance := be.open(b)
			qs := []*Queues{instance(b), instance(b), instance(b)}
			ctx := context.Background()
			var next atomic.Int64
			b.SetParallelism(12) // 24 callers on 2 CPUs
			b.RunParallel(func(pb *testing.PB) {
				q := qs[next.Add(1)%int64(len(qs))]
				for pb.Next() {
					s, err := q.Acquire(ctx, Ask{Category: "shell", Limit: 4, MaxWait: 64}, nil)
					if err != nil {
						b.Error(err)
						return
					}
					s.Release()
				}
			})
		})
	}
}

// TestSharedQueueFairBetweenPrincipals plays a flood against a victim
// in the shared queue's decisions, on Redis and on Postgres: the flood
// fills the slots and waits, the victim's one call comes after it, yet the
// next free slot is the victim's (it holds none, the flood holds some);
// the flood's own waiting bound refuses its excess while the victim still
// gets a place; and within the flood the order of arrival holds.
func TestSharedQueueFairBetweenPrincipals(t *testing.T) {
	steps := []decision{
		{"f1", "flood", "take", models.SlotHeld},
		{"f2", "flood", "take", models.SlotHeld},
		{"f3", "flood", "take", models.SlotWaiting},
		{"f4", "flood", "take", models.SlotWaiting},
		{"f5", "flood", "take", models.SlotWaiting},
		{"f6", "flood", "take", models.SlotPrincipalFull}, // three of the flood's wait: its own bound
		{"v1", "victim", "take", models.SlotWaiting},      // the category's bound (8) is far
		{"f1", "flood", "release", 0},
		{"f3", "flood", "take", models.SlotWaiting}, // first in line, but the flood holds a slot and the victim none
		{"v1", "victim", "take", models.SlotHeld},
		{"f2", "flood", "release", 0},
		{"f4", "flood", "take", models.SlotWaiting}, // the flood's order holds: f3 first
		{"f3", "flood", "take", models.SlotHeld},
		{"v2", "victim", "take", models.SlotWaiting},
		{"f3", "flood", "release", 0},
		{"v2", "victim", "take", models.SlotWaiting}, // now the victim holds one and the flood none: f4 goes first
		{"f4", "flood", "take", models.SlotHeld},
	}
	eachQueueBackend(t, 1, func(t *testing.T, qs []*Queues) {
		ctx := context.Background()
		play(t, qs[0], models.SlotRequest{Limit: 2, MaxWait: 8, MaxWaitEach: 3}, steps)
		if line, err := qs[0].Line(ctx, "code", "flood"); err != nil || line != (Line{Holding: 2, Waiting: 2, Mine: 1}) {
			t.Errorf("the line as the flood sees it: %+v, %v; want 2 holding (v1, f4), 2 waiting (f5, v2), 1 of the flood", line, err)
		}
		// The refusal for the caller's own bound says so.
		_, err := qs[0].Acquire(ctx, Ask{Category: "code", Principal: "victim", Limit: 2, MaxWait: 8, MaxWaitEach: 1}, nil)
		if !errors.Is(err, models.ErrQueueFull) || !errors.Is(err, ErrPrincipalFull) {
			t.Errorf("the victim's second waiter with a bound of 1: %v", err)
		}
	})
}
