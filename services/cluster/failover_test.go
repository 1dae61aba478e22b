package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/poll"
	"toolbelt/models"
)

// node is one instance over a Postgres database and a Redis server that
// the test stops and starts: its own store, Redis client, notices and
// queues, as app.New wires them.
type node struct {
	store   *models.Store
	client  *redis.Client
	notices *Notices
	queues  *Queues
}

// faultyCluster is a Postgres database, a Redis server the test controls,
// and a function making instances over both.
func faultyCluster(t *testing.T) (*dbtest.RedisProc, string, func(t *testing.T) *node) {
	t.Helper()
	db, rs := dbtest.Postgres(t), dbtest.RedisServer(t)
	return rs, db, func(t *testing.T) *node {
		ctx := context.Background()
		store, err := models.OpenPostgres(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		client, err := OpenRedis(ctx, rs.URL())
		if err != nil {
			t.Fatal(err)
		}
		n, err := SharedNotices(ctx, client, db, quiet)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close(); _ = client.Close(); _ = store.Close() })
		runNotices(t, n)
		return &node{store: store, client: client, notices: n, queues: FailoverQueues(client, store, n, quiet)}
	}
}

// redisUp waits until n's link hears Redis again (its probe asks every
// second).
func redisUp(t *testing.T, n *node) {
	t.Helper()
	poll.True(t, 20*time.Second, "redis heard again", func() bool { return n.notices.redis.up() })
}

// inEach waits until the queue of category counts holding and waiting
// calls in Redis and in Postgres, each.
func inEach(t *testing.T, n *node, category string, redisDepth, postgresDepth [2]int64) {
	t.Helper()
	redisQueue, postgresQueue := newRedisQueues(n.client, ""), &storeQueues{store: n.store}
	var inRedis, inPostgres [2]int64
	poll.True(t, 20*time.Second, fmt.Sprintf("%v in redis, %v in postgres", redisDepth, postgresDepth), func() bool {
		ctx := context.Background()
		var err error
		if inPostgres[0], inPostgres[1], err = postgresQueue.depth(ctx, category); err != nil {
			t.Fatal(err)
		}
		if inRedis[0], inRedis[1], err = redisQueue.depth(ctx, category); err != nil {
			inRedis = [2]int64{-1, -1} // Redis is down
		}
		return inRedis == redisDepth && inPostgres == postgresDepth
	})
}

// While Redis is down, the category queues of every instance are in
// Postgres, one line for the cluster: slots are taken and released, the
// limit holds across instances and a waiter on one is admitted when a
// holder on another leaves. Once Redis answers again, calls queue in
// Redis; after a restart, which lost its keys, too.
func TestQueuesFallBackToPostgres(t *testing.T) {
	rs, _, instance := faultyCluster(t)
	a, b := instance(t), instance(t)
	ctx := context.Background()
	none := [2]int64{}

	s, err := a.queues.Acquire(ctx, Ask{Category: "shell", Limit: 1, MaxWait: 8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	inEach(t, a, "shell", [2]int64{1, 0}, none)
	s.Release()
	inEach(t, a, "shell", none, none)

	rs.Stop()
	held, err := b.queues.Acquire(ctx, Ask{Category: "shell", Limit: 1, MaxWait: 8}, nil)
	if err != nil {
		t.Fatalf("acquire while redis is down: %v", err)
	}
	down := [2]int64{-1, -1}
	inEach(t, a, "shell", down, [2]int64{1, 0})
	got := make(chan error, 1)
	go func() {
		s, err := a.queues.Acquire(ctx, Ask{Category: "shell", Limit: 1, MaxWait: 8}, nil)
		if err == nil {
			s.Release()
		}
		got <- err
	}()
	inEach(t, b, "shell", down, [2]int64{1, 1}) // the limit holds across instances: a's call waits
	held.Release()
	if err := <-got; err != nil {
		t.Fatalf("the waiter on the other instance: %v", err)
	}
	inEach(t, b, "shell", down, none)

	rs.Start()
	redisUp(t, a)
	s, err = a.queues.Acquire(ctx, Ask{Category: "shell", Limit: 1, MaxWait: 8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	inEach(t, b, "shell", [2]int64{1, 0}, none)
	s.Release()
	inEach(t, b, "shell", none, none)

	rs.Restart()
	s, err = b.queues.Acquire(ctx, Ask{Category: "shell", Limit: 1, MaxWait: 8}, nil)
	if err != nil {
		t.Fatalf("acquire after a restart: %v", err)
	}
	redisUp(t, b)
	s.Release()
	s, err = b.queues.Acquire(ctx, Ask{Category: "shell", Limit: 1, MaxWait: 8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	inEach(t, a, "shell", [2]int64{1, 0}, none)
	s.Release()
	inEach(t, a, "shell", none, none)
}

// A slot is released in the queue it was taken in, even when Redis comes
// back meanwhile: one taken in Postgres during the outage frees its place
// there; one taken in Redis is given up there.
func TestQueueSlotReleasedWhereTaken(t *testing.T) {
	rs, _, instance := faultyCluster(t)
	a := instance(t)
	ctx := context.Background()
	none := [2]int64{}
	inRedis, err := a.queues.Acquire(ctx, Ask{Category: "code", Limit: 2, MaxWait: 8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs.Stop()
	inPostgres, err := a.queues.Acquire(ctx, Ask{Category: "code", Limit: 2, MaxWait: 8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs.Start() // empty: the slot taken in Redis is lost with it
	redisUp(t, a)
	// The slot taken in Redis before the outage is renewed there again,
	// counted while its call runs: both count.
	inEach(t, a, "code", [2]int64{1, 0}, [2]int64{1, 0})
	inPostgres.Release()
	inEach(t, a, "code", [2]int64{1, 0}, none)
	inRedis.Release()
	inEach(t, a, "code", none, none)
}

// tap hears the raw payloads of one channel of the notices.
type tap struct {
	mu    sync.Mutex
	heard []string
}

func (p *tap) add(payload string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.heard = append(p.heard, payload)
}

// has reports whether the tap heard a payload ending in suffix.
func (p *tap) has(suffix string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.heard {
		if len(h) >= len(suffix) && h[len(h)-len(suffix):] == suffix {
			return true
		}
	}
	return false
}

// tapRedis hears what is published on the notices' channel in Redis.
func tapRedis(t *testing.T, url string) *tap {
	t.Helper()
	opts, _ := redis.ParseURL(url)
	client := redis.NewClient(opts)
	sub := client.Subscribe(context.Background(), channel)
	if _, err := sub.Receive(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := &tap{}
	ch := sub.Channel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range ch {
			p.add(m.Payload)
		}
	}()
	t.Cleanup(func() { _ = sub.Close(); _ = client.Close(); <-done })
	return p
}

// tapPostgres hears what is notified on the notices' channel in Postgres.
func tapPostgres(t *testing.T, db string) *tap {
	t.Helper()
	conn, err := listen(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	p := &tap{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			note, err := conn.WaitForNotification(ctx)
			if err != nil {
				return
			}
			p.add(note.Payload)
		}
	}()
	t.Cleanup(func() { cancel(); <-done; _ = conn.Close(context.Background()) })
	return p
}

// counter counts the bodies of the messages an instance heard.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(body string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[body]++
}

func (c *counter) of(body string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[body]
}

// Notices get through while Redis is down, over Postgres, and over Redis
// again once it answers; each is sent on one channel only, so each
// message is heard once. The taps show the channel: a message sent over
// one is not on the other, which is checked once the other delivered a
// marker sent after it (each channel delivers in order).
func TestSharedNoticesFallBackToPostgres(t *testing.T) {
	rs, db, instance := faultyCluster(t)
	a, b := instance(t), instance(t)
	ctx := context.Background()
	heard := &counter{n: map[string]int{}}
	b.notices.OnMessage("test", heard.add)
	catalog := make(chan struct{}, 16)
	b.notices.On(Catalog, func() { catalog <- struct{}{} })
	overPostgres := tapPostgres(t, db)
	marker := 0
	// sentOver checks that body went over want and not over the other
	// channel: a marker notified after it has come through.
	sentOver := func(body string, want *tap) {
		t.Helper()
		marker++
		poll.True(t, 20*time.Second, body+" on its channel", func() bool { return want.has(" " + body) })
		m := fmt.Sprintf("marker-%d", marker)
		if err := a.store.DB().Exec("SELECT pg_notify(?, ?)", channel, "test tap "+m).Error; err != nil {
			t.Fatal(err)
		}
		poll.True(t, 20*time.Second, "the marker", func() bool { return overPostgres.has(" " + m) })
		if want != overPostgres && overPostgres.has(" "+body) {
			t.Errorf("%s went over Postgres too", body)
		}
	}
	send := func(body string) {
		t.Helper()
		a.notices.SendMessage(ctx, "test", body)
		poll.True(t, 20*time.Second, "b hears "+body, func() bool { return heard.of(body) > 0 })
	}

	overRedis := tapRedis(t, rs.URL())
	send("one")
	sentOver("one", overRedis)

	rs.Stop()
	send("two")
	sentOver("two", overPostgres)
	a.notices.Send(ctx, Catalog)
	select {
	case <-catalog:
	case <-time.After(20 * time.Second):
		t.Fatal("the change notice was not heard while redis was down")
	}

	rs.Start()
	// b's Redis listener, subscribed again, runs every handler: notices
	// may have been lost.
	select {
	case <-catalog:
	case <-time.After(20 * time.Second):
		t.Fatal("the handlers did not run after redis came back")
	}
	redisUp(t, a)
	overRedis = tapRedis(t, rs.URL())
	send("three")
	sentOver("three", overRedis)

	// Every message was heard once: the marker b hears on each channel
	// comes after any copy of them.
	if err := b.client.Publish(ctx, channel, "test tap end-redis").Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.store.DB().Exec("SELECT pg_notify(?, ?)", channel, "test tap end-postgres").Error; err != nil {
		t.Fatal(err)
	}
	poll.True(t, 20*time.Second, "the end markers", func() bool { return heard.of("end-redis") == 1 && heard.of("end-postgres") == 1 })
	for _, body := range []string{"one", "two", "three"} {
		if n := heard.of(body); n != 1 {
			t.Errorf("%s heard %d times", body, n)
		}
	}
}
