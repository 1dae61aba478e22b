package invoke

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"toolbelt/models"
	"toolbelt/services/cluster"
	"toolbelt/services/ops"
)

// DefaultQueueLimits is the concurrency per category: a browser and a
// shell are heavy.
func DefaultQueueLimits() map[string]int {
	return map[string]int{"browser": 3, "shell": 5, "filesystem": 16, "search": 8, "code": 4, "api": 16}
}

// DefaultQueueWaiting bounds the calls waiting per category (in the
// cluster when the queues are shared).
const DefaultQueueWaiting = 64

// categoryQueue lets a bounded number of calls of one category run at a
// time, with a bounded waiting list.
type categoryQueue struct {
	sem     *semaphore.Weighted
	limit   int
	waiting atomic.Int64
	running atomic.Int64
}

// queues holds one queue per category: in this process, or shared by
// the instances (shared: Deps.SharedQueues; waiters are admitted in their order of
// arrival on any instance), when the limits and the
// waiting bound hold in the cluster.
type queues struct {
	mu      sync.Mutex
	limits  map[string]int
	maxWait int
	byCat   map[string]*categoryQueue
	shared  *cluster.Queues
}

func newQueues(limits map[string]int, maxWait int) *queues {
	l := DefaultQueueLimits()
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
func (inv *Invoker) queue(next step) step {
	return func(ctx context.Context, c *call) ToolResult {
		if inv.queues.shared != nil {
			return inv.sharedQueue(ctx, c, next)
		}
		cq := inv.queues.of(c.def.Category)
		if !cq.sem.TryAcquire(1) {
			// Timed from before the call counts as waiting.
			waitStart := time.Now()
			if cq.waiting.Add(1) > int64(inv.queues.maxWait) {
				cq.waiting.Add(-1)
				return queueFull(c.def.Category, cq.limit, inv.queues.maxWait)
			}
			inv.metrics.Queued(c.def.Category, 1)
			err := cq.sem.Acquire(ctx, 1)
			cq.waiting.Add(-1)
			inv.metrics.Queued(c.def.Category, -1)
			inv.metrics.QueueWaited(c.def.Category, time.Since(waitStart))
			c.queueMs = time.Since(waitStart).Milliseconds()
			if err != nil {
				return cancelledWaiting()
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

// sharedQueue is queue over the queues the instances share: the slot is
// held in Redis or the database, renewed while the call runs, and given
// up when it ends (or, if this instance dies, when its lease lapses).
func (inv *Invoker) sharedQueue(ctx context.Context, c *call, next step) ToolResult {
	cat := c.def.Category
	limit := max(1, inv.queues.limits[cat])
	var waitStart time.Time
	slot, err := inv.queues.shared.Acquire(ctx, cat, limit, inv.queues.maxWait, func() {
		waitStart = time.Now()
		inv.metrics.Queued(cat, 1)
	})
	if !waitStart.IsZero() {
		inv.metrics.Queued(cat, -1)
		inv.metrics.QueueWaited(cat, time.Since(waitStart))
		c.queueMs = time.Since(waitStart).Milliseconds()
	}
	switch {
	case errors.Is(err, models.ErrQueueFull):
		return queueFull(cat, limit, inv.queues.maxWait)
	case err != nil && ctx.Err() != nil:
		return cancelledWaiting()
	case err != nil:
		inv.log.ErrorContext(ctx, "category queue", "err", err, "category", cat)
		return storeFailure(err)
	}
	defer slot.Release()
	return next(ctx, c)
}

// queueFull refuses a call past its category's waiting bound.
func queueFull(category string, limit, maxWait int) ToolResult {
	res := refusal(models.CodeQueueFull,
		fmt.Sprintf("too many %s calls are waiting (%d running, %d waiting)", category, limit, maxWait),
		"Wait a few seconds and call again.")
	res.Error.Retryable = true
	res.Error.RetryAfter = 2
	return res
}

func cancelledWaiting() ToolResult {
	return failure(models.CodeCancelled, "the call was cancelled while it waited for a free slot", false, "")
}

// ReportQueues exposes, when the queues are shared, each category's
// running and waiting calls in the cluster, read at scrape time
// (toolbelt_queue_waiting counts this instance's waiters alone).
func (inv *Invoker) ReportQueues(m *ops.Metrics) {
	if inv.queues.shared == nil {
		return
	}
	cats := make([]string, 0, len(inv.queues.limits))
	for cat := range inv.queues.limits {
		cats = append(cats, cat)
	}
	slices.Sort(cats)
	m.ClusterQueues(cats, inv.queues.shared.Depth)
}
