package invoke

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"toolbelt/models"
)

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
func (inv *Invoker) queue(next step) step {
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
