// Package cluster is what several instances over one database share in
// real time: a Redis client when TOOLBELT_REDIS_URL is set (rate-limit
// and key-guess counters, the results cache, change notices over pub/sub),
// and, without Redis, change notices over Postgres LISTEN/NOTIFY. A change
// notice names what changed (the catalog, grants, learned queries); each
// instance that hears it drops or rebuilds what it derived from it, so no
// instance polls the database for changes. Messages travel the same way
// with a body (the invoker's: cancel this call, send me its events), for
// what only another instance can do at once; what must survive a lost
// message is in the database.
package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/casbin/casbin/v2/persist"
	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	redisstore "github.com/ulule/limiter/v3/drivers/store/redis"

	"toolbelt/models"
)

// Topics of change notices.
const (
	// Catalog: a tool was registered, published, rolled back or retired.
	Catalog = "catalog"
	// Policy: Casbin policies changed (grants, roles).
	Policy = "policy"
	// Keys: an API key was revoked.
	Keys = "keys"
	// Learned: the message naming the tools whose learned queries an
	// instance changed (comma-separated).
	Learned = "learned"
)

// channel is the Redis pub/sub channel and the Postgres LISTEN channel.
const channel = "toolbelt_changes"

// OpenRedis connects to the Redis server of url (redis://, rediss:// or
// unix://) and checks that it answers. Errors never repeat the URL: it may
// hold a password.
func OpenRedis(ctx context.Context, url string) (*redis.Client, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("TOOLBELT_REDIS_URL: use a Redis URL such as redis://:PASSWORD@cache.internal:6379/0")
	}
	c := redis.NewClient(opts)
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pingCtx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redis does not answer: %w", err)
	}
	return c, nil
}

// LimiterStore is where ulule/limiter counts, under prefix, so that
// every instance counts against the same window and a limit is exact
// cluster-wide: in Redis when client is set; else, when the store is
// shared (Postgres), in its rate_counts table; else (one instance on
// SQLite) nil, and the caller keeps its memory store.
func LimiterStore(client *redis.Client, store *models.Store, prefix string) (limiter.Store, error) {
	switch {
	case client != nil:
		return redisstore.NewStoreWithOptions(client, limiter.StoreOptions{Prefix: "toolbelt:" + prefix, MaxRetry: limiter.DefaultMaxRetry})
	case store != nil && store.Shared():
		return &databaseRates{store: store, prefix: prefix, now: time.Now}, nil
	}
	return nil, nil
}

// Notices sends change notices to the other instances and runs the
// handlers of those they send. A nil *Notices (one instance on SQLite)
// sends nothing and hears nothing.
type Notices struct {
	self string // this instance, so it skips its own notices
	log  *slog.Logger
	send func(ctx context.Context, payload string) error

	mu       sync.Mutex
	handlers map[string][]func()
	messages map[string][]func(body string)

	stop   context.CancelFunc
	done   chan struct{}
	closed atomic.Bool // nothing is sent once closed
}

func newNotices(log *slog.Logger) *Notices {
	return &Notices{self: models.NewID(), log: log, handlers: map[string][]func(){}, messages: map[string][]func(string){},
		done: make(chan struct{})}
}

// MaxBody bounds the body of a message: Postgres refuses a NOTIFY payload
// of 8000 bytes or more, and a message carries its topic and sender too.
const MaxBody = 7000

// OnMessage runs fn with the body of each message of topic another
// instance sends (SendMessage). Unlike a change notice, a message is not
// replayed after an interruption: what must survive one is in the
// database. fn must not block long.
func (n *Notices) OnMessage(topic string, fn func(body string)) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.messages[topic] = append(n.messages[topic], fn)
}

// SendMessage sends body (at most MaxBody bytes) to the other instances'
// OnMessage handlers of topic. A message that cannot be sent is logged.
func (n *Notices) SendMessage(ctx context.Context, topic, body string) {
	if n == nil || n.closed.Load() {
		return
	}
	if len(body) > MaxBody {
		n.log.Warn("message too long to send", "topic", topic, "bytes", len(body))
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := n.send(ctx, topic+" "+n.self+" "+body); err != nil {
		n.log.Warn("send message", "topic", topic, "err", err)
	}
}

// On runs fn whenever another instance sends a notice of topic, and after
// the notices were interrupted (a lost connection, when some may have been
// missed). fn must not block long: notices are handled one at a time.
func (n *Notices) On(topic string, fn func()) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.handlers[topic] = append(n.handlers[topic], fn)
}

// Send tells the other instances that topic changed. A notice that cannot
// be sent is logged: the change itself is stored, and the other instances
// see it once they next rebuild.
func (n *Notices) Send(ctx context.Context, topic string) {
	if n == nil || n.closed.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := n.send(ctx, topic+" "+n.self); err != nil {
		n.log.Warn("send change notice", "topic", topic, "err", err)
	}
}

// heard runs the handlers of a notice's payload ("topic instance", or
// "topic instance body" for a message), unless this instance sent it.
func (n *Notices) heard(payload string) {
	topic, rest, _ := strings.Cut(payload, " ")
	from, body, message := strings.Cut(rest, " ")
	if from == n.self {
		return
	}
	n.mu.Lock()
	fns, msgs := n.handlers[topic], n.messages[topic]
	n.mu.Unlock()
	if message {
		for _, fn := range msgs {
			fn(body)
		}
		return
	}
	for _, fn := range fns {
		fn()
	}
}

// missed runs every handler: notices may have been lost.
func (n *Notices) missed() {
	n.mu.Lock()
	var fns []func()
	for _, hs := range n.handlers {
		fns = append(fns, hs...)
	}
	n.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// Close stops listening and waits for the listener to end. It is safe on
// nil and to call twice.
func (n *Notices) Close() {
	if n == nil || n.stop == nil {
		return
	}
	n.closed.Store(true)
	n.stop()
	<-n.done
}

// RedisNotices sends and hears change notices over Redis pub/sub. It is
// subscribed when it returns.
func RedisNotices(ctx context.Context, client *redis.Client, log *slog.Logger) (*Notices, error) {
	n := newNotices(log)
	n.send = func(ctx context.Context, payload string) error { return client.Publish(ctx, channel, payload).Err() }
	sub := client.Subscribe(ctx, channel)
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		_ = sub.Close()
		return nil, fmt.Errorf("subscribe to change notices: %w", err)
	}
	listen, cancel := context.WithCancel(context.Background())
	// Receive does not end with its context while it reads: closing the
	// subscription ends it.
	n.stop = func() { cancel(); _ = sub.Close() }
	go func() {
		defer close(n.done)
		for {
			// Receive (unlike Channel) reports a reconnection, after which
			// notices sent meanwhile are lost.
			msg, err := sub.Receive(listen)
			if listen.Err() != nil {
				return
			}
			switch m := msg.(type) {
			case *redis.Message:
				n.heard(m.Payload)
			case *redis.Subscription: // resubscribed after a lost connection
				n.missed()
			case nil:
				if err != nil {
					log.Warn("change notices interrupted", "err", err)
					select {
					case <-listen.Done():
						return
					case <-time.After(time.Second):
					}
				}
			}
		}
	}()
	return n, nil
}

// CasbinWatcher is a Casbin watcher over these notices: the enforcer calls
// Update after each policy change it makes, which sends a Policy notice,
// and the other instances' enforcers run the update callback (reload
// their policies). Nil on a nil *Notices.
func (n *Notices) CasbinWatcher() persist.Watcher {
	if n == nil {
		return nil
	}
	w := &casbinWatcher{n: n}
	n.On(Policy, func() {
		w.mu.Lock()
		fn := w.fn
		w.mu.Unlock()
		if fn != nil {
			fn("")
		}
	})
	return w
}

type casbinWatcher struct {
	n  *Notices
	mu sync.Mutex
	fn func(string)
}

func (w *casbinWatcher) SetUpdateCallback(fn func(string)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fn = fn
	return nil
}

func (w *casbinWatcher) Update() error {
	w.n.Send(context.Background(), Policy)
	return nil
}

// Close stops the callbacks; the notices close with the App.
func (w *casbinWatcher) Close() { _ = w.SetUpdateCallback(nil) }
