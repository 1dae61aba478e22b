package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"toolbelt/models"
)

// Queues are the category queues the instances share, so that a
// category's limit holds in the cluster (5 shell calls means 5 in the
// cluster) and its waiters are admitted in the order they arrived,
// whichever instance took them: a fair semaphore per category, in Redis
// (queue_redis.go) or, without Redis, in the database (models.TakeSlot),
// or in Redis falling back to the database (FailoverQueues).
//
// A call gets a ticket when it must wait; while fewer calls hold a slot
// than the limit, a slot is given to the first waiter of the principal
// holding the fewest slots (models.FairOrder), so one principal's flood
// yields to the others' calls, and each principal has a waiting bound of
// its own besides the category's. Each
// place and slot has a lease its instance renews (a slot every QueueRenew by
// a goroutine of its own, a place each time its waiter asks again), so an
// instance that dies frees its slots and places within QueueLease. A release,
// or a waiter leaving, wakes the waiters of the category on every
// instance (a message over Redis pub/sub or NOTIFY); each waiter also
// asks again every QueueRenew, in case a message was lost or a lease lapsed.
type Queues struct {
	backend queueBackend
	log     *slog.Logger
	lease   time.Duration
	renew   time.Duration
	wakers  wakers
}

// QueueLease is how long a slot or a place in a shared queue holds without a
// renewal, and QueueRenew how often its instance renews it: an instance
// that dies frees its slots within about QueueLease + QueueRenew.
const (
	QueueLease = 3 * time.Second
	QueueRenew = time.Second
)

// topicQueueFree is the message that a slot or a place of a category (its
// body) was given up.
const topicQueueFree = "queue.free"

// queueBackend keeps the queues' state.
type queueBackend interface {
	// take is models.Store.TakeSlot's decision.
	take(ctx context.Context, r models.SlotRequest) (models.Admission, error)
	// renew extends a held slot's lease (false: it had lapsed and was
	// taken back, as principal's).
	renew(ctx context.Context, category, token, principal string, lease time.Duration) (bool, error)
	// release gives up the slot or place of token and tells the other
	// instances.
	release(ctx context.Context, category, token string) error
	depth(ctx context.Context, category string) (holding, waiting int64, err error)
	// line counts the slots held and the waiters of category, and
	// principal's waiters.
	line(ctx context.Context, category, principal string) (Line, error)
}

// StoreQueues are queues in store's database (Postgres without Redis),
// waking the other instances through notices (nil: they ask again every
// QueueRenew).
func StoreQueues(store *models.Store, notices *Notices, log *slog.Logger) *Queues {
	return newQueues(&storeQueues{store: store, notices: notices}, notices, log)
}

// RedisQueues are queues in Redis alone (no database to fall back to); a
// release wakes the other instances over notices' channel (which must be
// RedisNotices on client; nil: they ask again every QueueRenew).
func RedisQueues(client *redis.Client, notices *Notices, log *slog.Logger) *Queues {
	self := ""
	if notices != nil {
		self = notices.self
	}
	return newQueues(newRedisQueues(client, self), notices, log)
}

func newQueues(b queueBackend, notices *Notices, log *slog.Logger) *Queues {
	q := &Queues{backend: b, log: log, lease: QueueLease, renew: QueueRenew, wakers: wakers{byCat: map[string]chan struct{}{}}}
	notices.OnMessage(topicQueueFree, q.wakers.wake)
	return q
}

// SetLease makes the slots and places of q hold lease without a renewal
// (QueueLease by default), for tests whose instances never die and whose
// machine may pause past QueueLease: their lines must not lapse under
// them. Renewals and the waiters' asks stay as often (QueueRenew, or a
// third of a shorter lease). Call it before q is used.
func (q *Queues) SetLease(lease time.Duration) {
	q.lease, q.renew = lease, min(QueueRenew, lease/3)
}

// Ask is what a call asks a queue for: a slot of Category, of which at
// most Limit are held at once in the cluster, with at most MaxWait calls
// waiting, and at most MaxWaitEach of Principal (0: no bound of its own).
type Ask struct {
	Category, Principal         string
	Limit, MaxWait, MaxWaitEach int
}

// Acquire waits for a slot as a asks, given fairly between principals
// (models.FairOrder); models.ErrQueueFull when MaxWait calls wait already
// or MaxWaitEach of a.Principal (the error says which). waiting, when
// set, is told once when the call has to wait. When ctx ends first, the
// call leaves the queue (its place given up, the waiters behind it woken)
// and Acquire returns ctx's error. The caller releases the slot it gets.
func (q *Queues) Acquire(ctx context.Context, a Ask, waiting func()) (*Slot, error) {
	category := a.Category
	r := models.SlotRequest{Category: category, Principal: a.Principal, Token: models.NewID(), Limit: max(1, a.Limit),
		MaxWait: a.MaxWait, MaxWaitEach: a.MaxWaitEach, Lease: q.lease}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		woken := q.wakers.wait(category)
		r.Now = time.Now()
		got, err := q.backend.take(ctx, r)
		if err != nil {
			// The decision may have been made before ctx ended.
			q.leave(category, r.Token)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		switch got {
		case models.SlotHeld:
			return q.hold(category, r.Token, r.Principal), nil
		case models.SlotFull:
			return nil, models.ErrQueueFull.Errorf("%d %s calls wait already", a.MaxWait, category)
		case models.SlotPrincipalFull:
			return nil, fmt.Errorf("%w: %w", ErrPrincipalFull, models.ErrQueueFull.Errorf("%d %s calls of yours wait already", a.MaxWaitEach, category))
		}
		if timer == nil {
			if waiting != nil {
				waiting()
			}
			timer = time.NewTimer(q.renew)
		} else {
			timer.Reset(q.renew)
		}
		select {
		case <-ctx.Done():
			q.leave(category, r.Token)
			return nil, ctx.Err()
		case <-woken: // the timer is Reset next round (Go 1.23 timers: no stale tick)
		case <-timer.C:
		}
	}
}

// leave gives up token's place (or a slot given just as ctx ended), even
// though the call's context ended, and wakes this instance's waiters.
func (q *Queues) leave(category, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := q.backend.release(ctx, category, token); err != nil {
		q.log.Warn("leave a queue: its place lapses with its lease", "category", category, "err", err)
	}
	q.wakers.wake(category)
}

// ErrPrincipalFull marks a refusal for the caller's own waiting bound
// (wrapped with models.ErrQueueFull).
var ErrPrincipalFull = errors.New("the caller's waiting bound")

// Line is a category queue as one principal sees it: the slots held,
// the calls waiting, and the principal's calls among them.
type Line struct {
	Holding, Waiting, Mine int64
}

// Line counts the calls of category holding a slot and waiting in the
// cluster, and principal's waiting.
func (q *Queues) Line(ctx context.Context, category, principal string) (Line, error) {
	return q.backend.line(ctx, category, principal)
}

// Depth counts the calls of category holding a slot and waiting, in the
// cluster.
func (q *Queues) Depth(ctx context.Context, category string) (holding, waiting int64, err error) {
	return q.backend.depth(ctx, category)
}

// Slot is a held slot of a shared queue, renewed until released.
type Slot struct {
	q                          *Queues
	category, token, principal string
	stop, done                 chan struct{}
	once                       sync.Once
}

func (q *Queues) hold(category, token, principal string) *Slot {
	s := &Slot{q: q, category: category, token: token, principal: principal, stop: make(chan struct{}), done: make(chan struct{})}
	go s.renewing()
	return s
}

// renewing renews the slot's lease every QueueRenew until it is released.
func (s *Slot) renewing() {
	defer close(s.done)
	t := time.NewTicker(s.q.renew)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.q.renew)
		held, err := s.q.backend.renew(ctx, s.category, s.token, s.principal, s.q.lease)
		cancel()
		switch {
		case err != nil:
			s.q.log.Warn("renew a queue slot", "category", s.category, "err", err)
		case !held:
			s.q.log.Warn("a queue slot lapsed while its call ran (this instance paused past its lease, or Redis lost it): taken back", "category", s.category)
		}
	}
}

// Release gives the slot up and wakes the waiters of its category. It is
// safe to call twice.
func (s *Slot) Release() {
	s.once.Do(func() {
		s.abandon()
		s.q.leave(s.category, s.token)
	})
}

// abandon stops renewing the slot without giving it up, as an instance
// that dies does: it lapses with its lease (tests).
func (s *Slot) abandon() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// wakers are, per category, a channel closed when a slot or place of it
// is given up: waiters take the channel before they ask, so a release
// between their asking and their waiting still wakes them.
type wakers struct {
	mu    sync.Mutex
	byCat map[string]chan struct{}
}

func (w *wakers) wait(category string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.byCat[category]
	if !ok {
		ch = make(chan struct{})
		w.byCat[category] = ch
	}
	return ch
}

func (w *wakers) wake(category string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.byCat[category]; ok {
		close(ch)
		delete(w.byCat, category)
	}
}

// storeQueues keep the queues in the database.
type storeQueues struct {
	store   *models.Store
	notices *Notices
}

func (b *storeQueues) take(ctx context.Context, r models.SlotRequest) (models.Admission, error) {
	return b.store.TakeSlot(ctx, r)
}

func (b *storeQueues) renew(ctx context.Context, category, token, principal string, lease time.Duration) (bool, error) {
	return b.store.RenewSlot(ctx, category, token, principal, time.Now(), lease)
}

func (b *storeQueues) release(ctx context.Context, category, token string) error {
	released, err := b.store.ReleaseSlot(ctx, token)
	if released {
		b.notices.SendMessage(ctx, topicQueueFree, category)
	}
	return err
}

func (b *storeQueues) depth(ctx context.Context, category string) (int64, int64, error) {
	return b.store.QueueDepth(ctx, category, time.Now())
}

func (b *storeQueues) line(ctx context.Context, category, principal string) (Line, error) {
	holding, waiting, mine, err := b.store.QueueLine(ctx, category, principal, time.Now())
	return Line{Holding: holding, Waiting: waiting, Mine: mine}, err
}
