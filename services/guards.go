package services

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/sync/semaphore"

	"toolbelt/models"
)

// rateLimits counts calls per tool and principal in memory (ulule/limiter;
// its Redis store is the path for several servers).
type rateLimits struct {
	store limiter.Store
}

func newRateLimits() *rateLimits { return &rateLimits{store: memory.NewStore()} }

// limit refuses a call beyond the tool's security.rateLimit for this
// principal, saying when to retry.
func (inv *Invoker) limit(next Step) Step {
	return func(ctx context.Context, c *call) ToolResult {
		rl := c.def.Security.RateLimit
		if rl == nil {
			return next(ctx, c)
		}
		var pid uint
		if c.caller != nil {
			pid = c.caller.ID
		}
		// The rate is part of the key, so a new version's limit starts fresh.
		key := fmt.Sprintf("%s|%d|%d|%d", c.def.Name, pid, rl.MaxCalls, rl.WindowMs)
		lc, err := inv.limits.store.Get(ctx, key, limiter.Rate{Period: time.Duration(rl.WindowMs) * time.Millisecond, Limit: int64(rl.MaxCalls)})
		if err != nil {
			return failure(models.CodeInternal, "internal error", true, "Try again.")
		}
		if lc.Reached {
			inv.metrics.Limited(c.def.Name)
			wait := max(1, int(time.Until(time.Unix(lc.Reset, 0)).Seconds()+0.999))
			res := refusal(models.CodeRateLimit,
				fmt.Sprintf("%s allows %d calls per %s and you have made them", c.def.Name, rl.MaxCalls, time.Duration(rl.WindowMs)*time.Millisecond),
				fmt.Sprintf("Wait %d s before calling %s again, or do something else meanwhile.", wait, c.def.Name))
			res.Error.Retryable = true
			res.Error.RetryAfter = wait
			return res
		}
		return next(ctx, c)
	}
}

// Default concurrency per category: a browser and a shell are heavy.
var DefaultQueueLimits = map[string]int{"browser": 3, "shell": 5, "filesystem": 16, "search": 8, "code": 4, "api": 16}

// DefaultQueueWaiting bounds the calls waiting per category.
const DefaultQueueWaiting = 64

// categoryQueue lets a bounded number of calls of one category run at a
// time, with a bounded waiting list.
type categoryQueue struct {
	sem     *semaphore.Weighted
	limit   int
	waiting atomic.Int64
	running atomic.Int64
}

// queues holds one queue per category.
type queues struct {
	mu      sync.Mutex
	limits  map[string]int
	maxWait int
	byCat   map[string]*categoryQueue
}

func newQueues(limits map[string]int, maxWait int) *queues {
	l := map[string]int{}
	for k, v := range DefaultQueueLimits {
		l[k] = v
	}
	for k, v := range limits {
		l[k] = v
	}
	if maxWait <= 0 {
		maxWait = DefaultQueueWaiting
	}
	return &queues{limits: l, maxWait: maxWait, byCat: map[string]*categoryQueue{}}
}

func (q *queues) of(category string) *categoryQueue {
	q.mu.Lock()
	defer q.mu.Unlock()
	cq, ok := q.byCat[category]
	if !ok {
		n := max(1, q.limits[category])
		cq = &categoryQueue{sem: semaphore.NewWeighted(int64(n)), limit: n}
		q.byCat[category] = cq
	}
	return cq
}

// queue runs at most the category's limit of calls at once; past the
// waiting bound a call is refused with QUEUE_FULL, and a call cancelled
// while it waits leaves the queue.
func (inv *Invoker) queue(next Step) Step {
	return func(ctx context.Context, c *call) ToolResult {
		cq := inv.queues.of(c.def.Category)
		if !cq.sem.TryAcquire(1) {
			// Timed from before the call counts as waiting.
			waitStart := time.Now()
			if cq.waiting.Add(1) > int64(inv.queues.maxWait) {
				cq.waiting.Add(-1)
				res := refusal(models.CodeQueueFull,
					fmt.Sprintf("too many %s calls are waiting (%d running, %d waiting)", c.def.Category, cq.limit, inv.queues.maxWait),
					"Wait a few seconds and call again.")
				res.Error.Retryable = true
				res.Error.RetryAfter = 2
				return res
			}
			inv.metrics.Queued(c.def.Category, 1)
			err := cq.sem.Acquire(ctx, 1)
			cq.waiting.Add(-1)
			inv.metrics.Queued(c.def.Category, -1)
			inv.metrics.QueueWaited(c.def.Category, time.Since(waitStart))
			c.queueMs = time.Since(waitStart).Milliseconds()
			if err != nil {
				return failure(models.CodeCancelled, "the call was cancelled while it waited for a free slot", false, "")
			}
		}
		cq.running.Add(1)
		defer func() {
			cq.running.Add(-1)
			cq.sem.Release(1)
		}()
		return next(ctx, c)
	}
}

// Backoff for retries: 1 s, 2 s, 4 s… with up to 20% jitter.
const retryBase = time.Second

// retryBackOff is that backoff. backoff's jitter is symmetric, so its
// intervals are centred 10% above the base: 1.1 s ± 1/11 is 1 s to 1.2 s.
// The intervals are not capped: maxRetries bounds them (MaxRetries
// retries wait at most 512 s at the last).
func retryBackOff() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{
		InitialInterval:     retryBase + retryBase/10,
		RandomizationFactor: 1.0 / 11,
		Multiplier:          2,
		MaxInterval:         math.MaxInt64,
	}
}

// errRetryable tells backoff.Retry that an attempt may be retried.
var errRetryable = errors.New("retryable failure")

// withRetries runs attempt until it succeeds, fails for a reason that is
// not retryable, or maxRetries retries are spent, with retryBackOff
// between attempts. backoff.Retry decides when to retry and for how long
// to wait; sleep does the waiting, so tests can pass a fake one (Retry's
// own timer cannot be replaced).
func withRetries(ctx context.Context, maxRetries int, sleep func(context.Context, time.Duration) error, attempt func() ToolResult) (ToolResult, int) {
	n := 0
	wait := &sleepingBackOff{ctx: ctx, next: retryBackOff(), sleep: sleep}
	res, err := backoff.Retry(ctx, func() (ToolResult, error) {
		n++
		res := attempt()
		if res.Success || res.Error == nil || !res.Error.Retryable {
			return res, nil
		}
		return res, errRetryable
	}, backoff.WithBackOff(wait), backoff.WithMaxTries(uint(max(maxRetries, 0))+1), backoff.WithMaxElapsedTime(0))
	if wait.err != nil || (err != nil && !errors.Is(err, errRetryable)) {
		return failure(models.CodeCancelled, "the call was cancelled between retries", false, ""), n
	}
	return res, n
}

// sleepingBackOff waits out each interval of next with sleep and tells
// backoff.Retry to wait no longer; a wait cut short stops the retries.
type sleepingBackOff struct {
	ctx   context.Context
	next  backoff.BackOff
	sleep func(context.Context, time.Duration) error
	err   error // why a wait was cut short
}

func (b *sleepingBackOff) Reset() { b.next.Reset() }

func (b *sleepingBackOff) NextBackOff() time.Duration {
	d := b.next.NextBackOff()
	if d == backoff.Stop {
		return backoff.Stop
	}
	if b.err = b.sleep(b.ctx, d); b.err != nil {
		return backoff.Stop
	}
	return 0
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
