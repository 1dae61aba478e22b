package cluster

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"toolbelt/models"
)

// FailoverQueues are queues in Redis while it answers and in store's
// database (Postgres) while it does not: a call that finds Redis
// unavailable takes its slot in the database instead, and once a probe
// hears Redis again (about every second), new calls queue in Redis again.
// A slot or a place stays, until released, in the queue it was taken in;
// one taken in Redis when Redis fails is given up there by its lease, and
// a waiter in Redis then joins the database's line.
//
// A category's limit is then exact in each queue, not across them: for
// as long as calls that took their slot in one queue still run after the
// switch to the other, both count, so up to twice the limit run at once
// in the cluster, and never more. The calls taken in the old queue end
// as they finish (and when Redis fails, the Redis leases lapse within
// QueueLease even for calls that run on); from then on, the limit is
// exact again. The order of arrival holds within each queue: the waiters
// in Redis when it fails join the database's line behind those there,
// and the waiters in the database when Redis answers again stay in that
// line while newcomers queue in Redis.
//
// notices must be SharedNotices over client and store's database: they
// wake the waiters of both queues and share the link to Redis.
func FailoverQueues(client *redis.Client, store *models.Store, notices *Notices, log *slog.Logger) *Queues {
	self, link := "", (*redisLink)(nil)
	if notices != nil {
		self, link = notices.self, notices.redis
	}
	if link == nil || link.client != client {
		// Without SharedNotices: a link of its own, whose probe ends
		// when the client is closed.
		link = newRedisLink(client, log)
	}
	b := &failoverQueues{link: link, redis: newRedisQueues(client, self), store: &storeQueues{store: store, notices: notices},
		where: map[string]queueBackend{}}
	return newQueues(b, notices, log)
}

// failoverQueues are the two queues of FailoverQueues and where each
// token's slot or place is.
type failoverQueues struct {
	link  *redisLink
	redis *redisQueues
	store *storeQueues

	mu    sync.Mutex
	where map[string]queueBackend // token → the queue that has its slot or place
}

// placed is the queue of token, or, for a new one, the queue to take it
// in, and records it: a release, even of a decision whose answer was
// lost, goes there.
func (f *failoverQueues) placed(token string) queueBackend {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.where[token]
	if !ok {
		b = f.store
		if f.link.up() {
			b = f.redis
		}
		f.where[token] = b
	}
	return b
}

func (f *failoverQueues) move(token string, b queueBackend) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.where[token] = b
}

func (f *failoverQueues) forget(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.where, token)
}

func (f *failoverQueues) take(ctx context.Context, r models.SlotRequest) (models.Admission, error) {
	if f.placed(r.Token) == f.redis {
		if f.link.up() {
			got, err := f.redis.take(ctx, r)
			if !f.link.fault(ctx, err) {
				if err == nil && got == models.SlotFull {
					f.forget(r.Token)
				}
				return got, err
			}
		}
		// Redis is unavailable: the token's place there, if any, lapses
		// with its lease, and it queues in the database from now on.
		f.move(r.Token, f.store)
	}
	got, err := f.store.take(ctx, r)
	if err == nil && got == models.SlotFull {
		f.forget(r.Token)
	}
	return got, err
}

func (f *failoverQueues) renew(ctx context.Context, category, token, principal string, lease time.Duration) (bool, error) {
	if f.placed(token) == f.store {
		return f.store.renew(ctx, category, token, principal, lease)
	}
	if !f.link.up() {
		// The slot lapses in Redis; the call runs on (see FailoverQueues).
		return true, nil
	}
	held, err := f.redis.renew(ctx, category, token, principal, lease)
	if f.link.fault(ctx, err) {
		return true, nil
	}
	return held, err
}

func (f *failoverQueues) release(ctx context.Context, category, token string) error {
	b := f.placed(token)
	f.forget(token)
	if b == f.redis && !f.link.up() {
		return nil // the slot or place lapses in Redis with its lease
	}
	err := b.release(ctx, category, token)
	if b == f.redis {
		f.link.fault(ctx, err)
	}
	return err
}

// depth counts both queues: after a switch, calls of the one left behind
// may still hold slots or wait.
func (f *failoverQueues) depth(ctx context.Context, category string) (int64, int64, error) {
	holding, waiting, err := f.store.depth(ctx, category)
	if err != nil || !f.link.up() {
		return holding, waiting, err
	}
	h, w, err := f.redis.depth(ctx, category)
	if f.link.fault(ctx, err) {
		return holding, waiting, nil
	}
	return holding + h, waiting + w, err
}

// line counts both queues, as depth does.
func (f *failoverQueues) line(ctx context.Context, category, principal string) (Line, error) {
	l, err := f.store.line(ctx, category, principal)
	if err != nil || !f.link.up() {
		return l, err
	}
	r, err := f.redis.line(ctx, category, principal)
	if f.link.fault(ctx, err) {
		return l, nil
	}
	return Line{Holding: l.Holding + r.Holding, Waiting: l.Waiting + r.Waiting, Mine: l.Mine + r.Mine}, err
}
