package cluster

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisLink is this instance's view of whether Redis answers, which the
// queues and the notices share when they fall back to Postgres: up until
// a call to Redis fails for want of Redis (fault), then down, while a
// probe PINGs Redis every redisProbeEvery, until it answers. While it is
// down, nothing waits on Redis: a Redis that does not answer at all
// (a lost host) would hold each call for the client's timeouts.
type redisLink struct {
	client *redis.Client
	log    *slog.Logger
	every  time.Duration
	down   atomic.Bool

	mu      sync.Mutex
	probing bool
	closed  bool
	stop    chan struct{}
	probes  sync.WaitGroup
}

// redisProbeEvery is how often a redisLink that is down asks Redis again.
const redisProbeEvery = time.Second

func newRedisLink(client *redis.Client, log *slog.Logger) *redisLink {
	return &redisLink{client: client, log: log, every: redisProbeEvery, stop: make(chan struct{})}
}

// up reports whether Redis answered last.
func (l *redisLink) up() bool { return !l.down.Load() }

// fault reports whether err, from a call to Redis within ctx, means Redis
// is unavailable: any error but a missing key (redis.Nil) and the caller's
// own context ending (refused or lost connections, timeouts, replies such
// as LOADING after a restart). Then the link is down until the probe it
// starts hears Redis again.
func (l *redisLink) fault(ctx context.Context, err error) bool {
	if err == nil || errors.Is(err, redis.Nil) || ctx.Err() != nil {
		return false
	}
	if !l.down.Swap(true) {
		l.log.Warn("redis does not answer: the queues and notices use Postgres until it does", "err", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.probing && !l.closed {
		l.probing = true
		l.probes.Add(1)
		go l.probe()
	}
	return true
}

// probe PINGs Redis every l.every until it answers, the link is closed
// or the client is.
func (l *redisLink) probe() {
	defer l.probes.Done()
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.every)
		err := l.client.Ping(ctx).Err()
		cancel()
		if err == nil || errors.Is(err, redis.ErrClosed) {
			l.mu.Lock()
			if err == nil {
				l.down.Store(false)
			}
			l.probing = false
			l.mu.Unlock()
			if err == nil {
				l.log.Info("redis answers again: the queues and notices use it")
			}
			return
		}
	}
}

// close stops the probe and waits for it.
func (l *redisLink) close() {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.stop)
	}
	l.mu.Unlock()
	l.probes.Wait()
}
