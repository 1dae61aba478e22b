package invoke

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

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
// cluster when the queues are shared), and DefaultQueueWaitingEach those
// of one principal among them: one caller alone cannot fill a category's
// waiting list.
const (
	DefaultQueueWaiting     = 64
	DefaultQueueWaitingEach = 16
)

// categoryQueue lets a bounded number of calls of one category run at a
// time. A slot that frees goes to the first waiter of the principal
// running the fewest calls of the category (models.FairOrder), so a
// principal's flood yields to another's call, not the other way round;
// the waiting list is bounded per category and per principal. Places
// reserved by async calls at their submission count as waiting.
type categoryQueue struct {
	limit int

	mu        sync.Mutex
	running   map[string]int // principal → calls holding a slot
	held      int
	waiters   []*waiter      // in order of arrival
	waiting   map[string]int // principal → waiters and reserved places
	waitCount int
}

// waiter is a call waiting for a slot; ready is closed when it gets one.
type waiter struct {
	principal string
	ready     chan struct{}
}

// queues holds one queue per category: in this process, or shared by
// the instances (shared: Deps.SharedQueues), when the limits, the fair
// order and the waiting bounds hold in the cluster.
type queues struct {
	mu                   sync.Mutex
	limits               map[string]int
	maxWait, maxWaitEach int
	byCat                map[string]*categoryQueue
	shared               *cluster.Queues
	// reserved are the places async calls took when they were accepted,
	// by call id, until the call reaches the queue guard or ends; over
	// shared queues they are counted here until the call queues there.
	reserved map[string]reservation
	// pending counts reserved by category and principal (shared queues).
	pending map[[2]string]int
	// transit orders a reserved call's first ask of the shared queue
	// (which may put its place there) and the claim of its reservation
	// (read-locked together) against reserveShared's count (locked): so a
	// place is never counted both here and in the shared queue, nor in
	// neither.
	transit sync.RWMutex
}

// reservation is the place an accepted async call holds in its
// category's queue until it runs.
type reservation struct{ category, principal string }

func newQueues(limits map[string]int, maxWait, maxWaitEach int) *queues {
	l := DefaultQueueLimits()
	for k, v := range limits {
		l[k] = v
	}
	if maxWait <= 0 {
		maxWait = DefaultQueueWaiting
	}
	if maxWaitEach <= 0 {
		maxWaitEach = DefaultQueueWaitingEach
	}
	return &queues{limits: l, maxWait: maxWait, maxWaitEach: min(maxWaitEach, maxWait), byCat: map[string]*categoryQueue{},
		reserved: map[string]reservation{}, pending: map[[2]string]int{}}
}

func (q *queues) of(category string) *categoryQueue {
	q.mu.Lock()
	defer q.mu.Unlock()
	cq, ok := q.byCat[category]
	if !ok {
		n := max(1, q.limits[category])
		cq = &categoryQueue{limit: n, running: map[string]int{}, waiting: map[string]int{}}
		q.byCat[category] = cq
	}
	return cq
}

// principalKey names a call's principal in the queues ("" for none).
func principalKey(c *call) string {
	if c.caller == nil {
		return ""
	}
	return strconv.FormatUint(uint64(c.caller.ID), 10)
}

// Which bound refused a call (the label of toolbelt_queue_refused_total).
const (
	boundCategory  = "category"
	boundPrincipal = "principal"
)

// full says which waiting bound a new waiter of principal would pass,
// "" when none (cq.mu held). Places reserved while slots are free will
// not wait: they count only beyond the free slots.
func (cq *categoryQueue) full(principal string, maxWait, maxWaitEach int) string {
	return pastBound(int64(cq.limit-cq.held), int64(cq.waitCount), int64(cq.waiting[principal]), maxWait, maxWaitEach)
}

// pastBound says which waiting bound one more waiting call of a principal
// would pass, with free slots, all calls waiting (or reserved) and the
// principal's: "", boundCategory or boundPrincipal.
func pastBound(free, all, mine int64, maxWait, maxWaitEach int) string {
	free = max(0, free)
	switch {
	case all-free >= int64(maxWait):
		return boundCategory
	case mine-free >= int64(maxWaitEach):
		return boundPrincipal
	}
	return ""
}

// enter gives the call of principal a slot when one is free and nobody
// waits, else a place in line (w), unless a bound is passed (refused
// names it). A call that reserved its place at submission converts it
// and is never refused.
func (cq *categoryQueue) enter(principal string, reserved bool, maxWait, maxWaitEach int) (w *waiter, refused string) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if reserved {
		cq.unwait(principal)
	}
	if cq.held < cq.limit && len(cq.waiters) == 0 {
		cq.take(principal)
		return nil, ""
	}
	if !reserved {
		if refused = cq.full(principal, maxWait, maxWaitEach); refused != "" {
			return nil, refused
		}
	}
	w = &waiter{principal: principal, ready: make(chan struct{})}
	cq.waiters = append(cq.waiters, w)
	cq.waiting[principal]++
	cq.waitCount++
	return w, ""
}

// leave takes w out of the line; false when it was given a slot first
// (which the caller then releases).
func (cq *categoryQueue) leave(w *waiter) bool {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	i := slices.Index(cq.waiters, w)
	if i < 0 {
		return false
	}
	cq.waiters = slices.Delete(cq.waiters, i, i+1)
	cq.unwait(w.principal)
	return true
}

// release gives principal's slot back and hands the free slots out.
func (cq *categoryQueue) release(principal string) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	cq.held--
	if cq.running[principal]--; cq.running[principal] == 0 {
		delete(cq.running, principal)
	}
	cq.dispatch()
}

// dispatch gives each free slot to the waiter models.FairOrder names
// (cq.mu held).
func (cq *categoryQueue) dispatch() {
	for cq.held < cq.limit && len(cq.waiters) > 0 {
		best := 0
		for i, w := range cq.waiters {
			if cq.running[w.principal] < cq.running[cq.waiters[best].principal] {
				best = i
			}
		}
		w := cq.waiters[best]
		cq.waiters = slices.Delete(cq.waiters, best, best+1)
		cq.unwait(w.principal)
		cq.take(w.principal)
		close(w.ready)
	}
}

func (cq *categoryQueue) take(principal string) {
	cq.held++
	cq.running[principal]++
}

func (cq *categoryQueue) unwait(principal string) {
	cq.waitCount--
	if cq.waiting[principal]--; cq.waiting[principal] == 0 {
		delete(cq.waiting, principal)
	}
}

// reserve takes a place in c's category queue for an async call being
// accepted, so the waiting bounds hold at submission: refused, a
// QUEUE_FULL result to answer at once (429) instead of 202.
func (inv *Invoker) reserve(ctx context.Context, c *call) *ToolResult {
	q, cat, who := inv.admission.queues, c.def.Category, principalKey(c)
	var refused string
	if q.shared == nil {
		refused = q.reserveLocal(c.id, cat, who)
	} else {
		var err error
		if refused, err = q.reserveShared(ctx, c.id, cat, who); err != nil {
			inv.log.ErrorContext(ctx, "count a category queue", "err", err, "category", cat)
			res := storeFailure(err)
			return &res
		}
	}
	if refused == "" {
		return nil
	}
	res := inv.queueFull(cat, refused)
	return &res
}

// reserveLocal counts the place of call id as waiting in its category's
// queue of this process, unless a bound refuses it (which it names).
func (q *queues) reserveLocal(id, category, principal string) string {
	cq := q.of(category)
	cq.mu.Lock()
	refused := cq.full(principal, q.maxWait, q.maxWaitEach)
	if refused == "" {
		cq.waiting[principal]++
		cq.waitCount++
	}
	cq.mu.Unlock()
	if refused == "" {
		q.mu.Lock()
		q.reserved[id] = reservation{category, principal}
		q.mu.Unlock()
	}
	return refused
}

// reserveShared counts the place of call id here until it queues in the
// shared queue, unless the cluster's waiters and the places reserved
// here pass a bound (which it names).
func (q *queues) reserveShared(ctx context.Context, id, category, principal string) (string, error) {
	q.transit.Lock()
	defer q.transit.Unlock()
	line, err := q.shared.Line(ctx, category, principal)
	if err != nil {
		return "", err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, n := range q.pending {
		if k[0] == category {
			line.Waiting += int64(n)
			if k[1] == principal {
				line.Mine += int64(n)
			}
		}
	}
	free := int64(max(1, q.limits[category])) - line.Holding
	refused := pastBound(free, line.Waiting, line.Mine, q.maxWait, q.maxWaitEach)
	if refused == "" {
		q.reserved[id] = reservation{category, principal}
		q.pending[[2]string{category, principal}]++
	}
	return refused, nil
}

// claimReservation takes the reservation of call id out of the table:
// the call is now in its queue, or ended.
func (q *queues) claimReservation(id string) (reservation, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	r, ok := q.reserved[id]
	if !ok {
		return r, false
	}
	delete(q.reserved, id)
	if q.shared != nil {
		k := [2]string{r.category, r.principal}
		if q.pending[k]--; q.pending[k] <= 0 {
			delete(q.pending, k)
		}
	}
	return r, true
}

// transitClaim read-locks transit when call id holds a reservation and
// returns the claim of it, which unlocks (once; later calls do nothing).
func (q *queues) transitClaim(id string) func() {
	q.mu.Lock()
	_, reserved := q.reserved[id]
	q.mu.Unlock()
	if !reserved {
		return func() {}
	}
	q.transit.RLock()
	done := false
	return func() {
		if !done {
			done = true
			q.claimReservation(id)
			q.transit.RUnlock()
		}
	}
}

// unreserve gives up the place of call id if it still holds one (the
// call ended before it queued: refused by a guard, or run elsewhere).
func (inv *Invoker) unreserve(id string) {
	r, ok := inv.admission.queues.claimReservation(id)
	if !ok || inv.admission.queues.shared != nil {
		return
	}
	cq := inv.admission.queues.of(r.category)
	cq.mu.Lock()
	defer cq.mu.Unlock()
	cq.unwait(r.principal)
}

// queue runs at most the category's limit of calls at once, giving free
// slots fairly between principals; past a waiting bound (the category's,
// or the caller's own) a call is refused with QUEUE_FULL, and a call
// cancelled while it waits leaves the queue.
func (inv *Invoker) queue(next step) step {
	return func(ctx context.Context, c *call) ToolResult {
		if inv.admission.queues.shared != nil {
			return inv.sharedQueue(ctx, c, next)
		}
		return inv.localQueue(ctx, c, next)
	}
}

// localQueue is queue over this process's own queues.
func (inv *Invoker) localQueue(ctx context.Context, c *call, next step) ToolResult {
	cat, who := c.def.Category, principalKey(c)
	cq := inv.admission.queues.of(cat)
	_, reserved := inv.admission.queues.claimReservation(c.id)
	// Timed from before the call counts as waiting.
	waitStart := time.Now()
	w, refused := cq.enter(who, reserved, inv.admission.queues.maxWait, inv.admission.queues.maxWaitEach)
	if refused != "" {
		return inv.queueFull(cat, refused)
	}
	if w != nil {
		inv.metrics.Queued(cat, 1)
		select {
		case <-w.ready:
		case <-ctx.Done():
			if !cq.leave(w) {
				cq.release(who) // given a slot as it was cancelled
			}
			inv.metrics.Queued(cat, -1)
			return cancelledWaiting()
		}
		inv.metrics.Queued(cat, -1)
		inv.metrics.QueueWaited(cat, time.Since(waitStart))
		c.timing.queueMs = time.Since(waitStart).Milliseconds()
	}
	defer cq.release(who)
	return next(ctx, c)
}

// sharedQueue is queue over the queues the instances share: the slot is
// held in Redis or the database, renewed while the call runs, and given
// up when it ends (or, if this instance dies, when its lease lapses).
func (inv *Invoker) sharedQueue(ctx context.Context, c *call, next step) ToolResult {
	cat := c.def.Category
	limit := max(1, inv.admission.queues.limits[cat])
	// A place reserved at submission counts here until the call has a
	// place or a slot in the shared queue, or is refused there: its first
	// ask and the claim happen under transit's read lock.
	claim := inv.admission.queues.transitClaim(c.id)
	var waitStart time.Time
	slot, err := inv.admission.queues.shared.Acquire(ctx, cluster.Ask{Category: cat, Principal: principalKey(c), Limit: limit,
		MaxWait: inv.admission.queues.maxWait, MaxWaitEach: inv.admission.queues.maxWaitEach}, func() {
		claim()
		waitStart = time.Now()
		inv.metrics.Queued(cat, 1)
	})
	claim()
	if !waitStart.IsZero() {
		inv.metrics.Queued(cat, -1)
		inv.metrics.QueueWaited(cat, time.Since(waitStart))
		c.timing.queueMs = time.Since(waitStart).Milliseconds()
	}
	switch {
	case errors.Is(err, cluster.ErrPrincipalFull):
		return inv.queueFull(cat, boundPrincipal)
	case errors.Is(err, models.ErrQueueFull):
		return inv.queueFull(cat, boundCategory)
	case err != nil && ctx.Err() != nil:
		return cancelledWaiting()
	case models.Unavailable(err):
		// Neither Redis nor the database answers: the call takes a slot of
		// this instance's own queue, so the limit holds per instance
		// until they are back, rather than no call running at all.
		inv.log.WarnContext(ctx, "the shared category queue does not answer: queueing on this instance", "category", cat, "err", err)
		return inv.localQueue(ctx, c, next)
	case err != nil:
		inv.log.ErrorContext(ctx, "category queue", "err", err, "category", cat)
		return storeFailure(err)
	}
	defer slot.Release()
	return next(ctx, c)
}

// queueFull refuses a call past a waiting bound of its category, counted
// in toolbelt_queue_refused_total.
func (inv *Invoker) queueFull(category, bound string) ToolResult {
	inv.metrics.QueueRefused(category, bound)
	q := inv.admission.queues
	msg := fmt.Sprintf("too many %s calls are waiting (%d running, %d waiting)", category, max(1, q.limits[category]), q.maxWait)
	suggestion := "Wait a few seconds and call again."
	if bound == boundPrincipal {
		msg = fmt.Sprintf("you have %d %s calls waiting already, the most one caller may have waiting", q.maxWaitEach, category)
		suggestion = "Wait for some of your calls to finish (poll them) before sending more."
	}
	res := refusal(models.CodeQueueFull, msg, suggestion)
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
	if inv.admission.queues.shared == nil {
		return
	}
	cats := make([]string, 0, len(inv.admission.queues.limits))
	for cat := range inv.admission.queues.limits {
		cats = append(cats, cat)
	}
	slices.Sort(cats)
	m.ClusterQueues(cats, inv.admission.queues.shared.Depth)
}
