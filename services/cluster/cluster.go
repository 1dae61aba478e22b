// Package cluster is what several instances over one database share in
// real time. On Postgres, the rate-limit and key-guess counters are in
// the database (rate_counts), so that a limit holds through anything
// Redis does; the category queues are in Redis when TOOLBELT_REDIS_URL
// is set, else in the database; change notices travel over Redis pub/sub
// and Postgres LISTEN/NOTIFY. Redis is an accelerator, never a single
// point of failure: while it does not answer, the queues and the notices
// fall back to Postgres, and move back once it answers again (see
// FailoverQueues for what holds during a switch); a result the cache
// cannot read from Redis is a miss. A change notice names what changed
// (the catalog, grants, learned queries); each instance that hears it
// drops or rebuilds what it derived from it, so no instance polls the
// database for changes. Messages travel the same way with a body (the
// invoker's: cancel this call, send me its events), for what only another
// instance can do at once; what must survive a lost message is in the
// database.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/casbin/casbin/v2/persist"
	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"

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
	// A command is retried (MaxRetries) and so is each dial it makes:
	// go-redis' five dials a try would hold the calls that find Redis
	// gone about two seconds before they fall back to Postgres.
	opts.DialerRetries = 1
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
// cluster-wide: when the store is shared (Postgres), in its rate_counts
// table, whether or not Redis is configured. Counting in Redis would be
// faster, but a limit must hold through Redis: while it is down, every
// limited call would fail, and a restart would forget the counts and
// let a principal make its calls again. One instance on SQLite: nil, and
// the caller keeps its memory store.
func LimiterStore(store *models.Store, prefix string) limiter.Store {
	if store == nil || !store.Shared() {
		return nil
	}
	return &databaseRates{store: store, prefix: prefix, now: time.Now}
}

// Notices sends change notices to the other instances and, while Run
// runs, runs the handlers of those they send. A nil *Notices (one
// instance on SQLite) sends nothing and hears nothing.
type Notices struct {
	self string // this instance, so it skips its own notices
	log  *slog.Logger
	send func(ctx context.Context, payload string) error
	// redis is the link to Redis of SharedNotices, which the queues
	// falling back to Postgres share (nil: the notices use one channel).
	redis *redisLink

	mu       sync.Mutex
	handlers map[string][]func()
	messages map[string][]func(body string)

	// listeners hear the notices while Run runs; closers release what
	// the constructor opened (Close).
	listeners []listener
	closers   []func()
	ran       atomic.Bool
	closed    atomic.Bool // nothing is sent once closed
}

// listener hears notices on a connection made at construction: run until
// its ctx ends, then it closes what it opened; close closes the
// connection if run never took it.
type listener struct {
	run   func(ctx context.Context)
	close func()
}

func newNotices(log *slog.Logger) *Notices {
	return &Notices{self: models.NewID(), log: log, handlers: map[string][]func(){}, messages: map[string][]func(string){}}
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

// Run hears the notices and runs their handlers until ctx ends. The
// handlers are registered before: nothing is handled before Run. It
// returns at once on nil.
func (n *Notices) Run(ctx context.Context) error {
	if n == nil {
		return nil
	}
	if n.ran.Swap(true) {
		return errors.New("the notices run already")
	}
	var wg sync.WaitGroup
	for _, l := range n.listeners {
		wg.Go(func() { l.run(ctx) })
	}
	wg.Wait()
	return nil
}

// Close stops sending and closes the connections; it comes after Run
// ended, or when it never ran. It is safe on nil and to call twice.
func (n *Notices) Close() {
	if n == nil || n.closed.Swap(true) {
		return
	}
	for _, l := range n.listeners {
		l.close()
	}
	for _, c := range n.closers {
		c()
	}
}

// RedisNotices sends and hears change notices over Redis pub/sub. It is
// subscribed when it returns: what is sent from then on is heard once Run
// runs.
func RedisNotices(ctx context.Context, client *redis.Client, log *slog.Logger) (*Notices, error) {
	n := newNotices(log)
	l, err := n.listenRedis(ctx, client)
	if err != nil {
		return nil, err
	}
	n.send = func(ctx context.Context, payload string) error { return client.Publish(ctx, channel, payload).Err() }
	n.listeners = []listener{l}
	return n, nil
}

// SharedNotices sends and hears change notices over Redis pub/sub and
// Postgres LISTEN/NOTIFY on the database of url at once: it hears both,
// and sends each notice over Redis or, while Redis does not answer, over
// Postgres. One channel a notice, so none is heard twice, but for a send
// to Redis that failed after Redis took it (a reply lost to a timeout),
// which goes again over Postgres. After a Redis outage, the notices sent
// meanwhile came over Postgres, and the Redis listener runs every handler
// once it is subscribed again, as after any interruption. It is
// listening on both when it returns; Run hears them.
func SharedNotices(ctx context.Context, client *redis.Client, url string, log *slog.Logger) (*Notices, error) {
	n := newNotices(log)
	sendPostgres, overPostgres, err := n.listenPostgres(ctx, url)
	if err != nil {
		return nil, err
	}
	overRedis, err := n.listenRedis(ctx, client)
	if err != nil {
		overPostgres.close()
		return nil, err
	}
	n.redis = newRedisLink(client, log)
	n.send = func(ctx context.Context, payload string) error {
		if n.redis.up() {
			err := client.Publish(ctx, channel, payload).Err()
			if !n.redis.fault(ctx, err) {
				return err
			}
		}
		return sendPostgres(ctx, payload)
	}
	n.listeners = []listener{overRedis, overPostgres}
	n.closers = []func(){n.redis.close}
	return n, nil
}

// listenRedis subscribes to the notices over Redis pub/sub; the listener
// hears them while it runs.
func (n *Notices) listenRedis(ctx context.Context, client *redis.Client) (l listener, err error) {
	sub := client.Subscribe(ctx, channel)
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		_ = sub.Close()
		return l, fmt.Errorf("subscribe to change notices: %w", err)
	}
	l.run = func(ctx context.Context) {
		// Receive does not end with its context while it reads: closing
		// the subscription ends it.
		closed := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			defer close(closed)
			_ = sub.Close()
		})
		n.hearRedis(ctx, sub)
		if !stop() {
			<-closed
		}
	}
	l.close = func() { _ = sub.Close() } // a second close does nothing
	return l, nil
}

// hearRedis hears the notices on sub until ctx ends.
func (n *Notices) hearRedis(ctx context.Context, sub *redis.PubSub) {
	interrupted := false
	for {
		// Receive (unlike Channel) reports a reconnection, after which
		// notices sent meanwhile are lost.
		msg, err := sub.Receive(ctx)
		if ctx.Err() != nil || n.closed.Load() {
			return
		}
		switch m := msg.(type) {
		case *redis.Message:
			n.heard(m.Payload)
		case *redis.Subscription: // resubscribed after a lost connection
			if interrupted {
				interrupted = false
				n.log.Info("change notices over redis resumed")
			}
			n.missed()
		case nil:
			if err != nil {
				if !interrupted { // once an outage: it is retried every second
					interrupted = true
					n.log.Warn("change notices over redis interrupted", "err", err)
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
			}
		}
	}
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
