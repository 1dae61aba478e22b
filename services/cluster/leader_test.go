package cluster

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/poll"
	"toolbelt/models"
)

// TestCutOffLeaderStopsBeforeAnotherLeads runs two electors over one
// Postgres database, a's through a proxy that the test cuts (its packets
// held, as in a partition, or while a's host is frozen: its connections
// stay open). b leads within LeaderLease + Retry, and the leader-only
// jobs never run on both at once: a's ended before b's began. Reconnected,
// a follows, and b's jobs run on.
func TestCutOffLeaderStopsBeforeAnotherLeads(t *testing.T) {
	db := dbtest.Postgres(t)
	proxy := newHoldingProxy(t, db)
	open := func(u string) *models.Store {
		store, err := models.OpenPostgres(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		return store
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, b := New(open(proxy.url), "a", log), New(open(db), "b", log)

	// Each elector's single job records when it ran.
	type span struct {
		who        string
		began, end time.Time
	}
	var mu sync.Mutex
	var spans []span
	job := func(who string) Job {
		return func(ctx context.Context) error {
			began := time.Now()
			<-ctx.Done()
			mu.Lock()
			spans = append(spans, span{who, began, time.Now()})
			mu.Unlock()
			return nil
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(ctx, job("a")) })
	// tries is long enough for a follower to try to lead twice: a try that
	// finds another leading leaves no trace (no row written, no log line,
	// no counter) to wait for instead, so this sleep cannot be a condition.
	const tries = 2 * Retry
	poll.True(t, 5*time.Second, "a leads", a.Leading)
	wg.Go(func() { _ = b.Run(ctx, job("b")) })
	time.Sleep(tries) // b tries, and finds a leading
	if b.Leading() {
		t.Fatal("b leads beside a")
	}

	cut := time.Now()
	proxy.hold(true)
	poll.True(t, LeaderLease+Retry+time.Second, "b leads while a is cut off", b.Leading)
	t.Logf("b leads %s after a was cut off", time.Since(cut).Round(time.Millisecond))
	if a.Leading() {
		t.Error("a and b lead")
	}
	proxy.hold(false)
	time.Sleep(tries) // a, reconnected, tries and finds b leading
	if a.Leading() || !b.Leading() {
		t.Errorf("after a reconnected: a leads %v, b leads %v", a.Leading(), b.Leading())
	}
	cancel()
	wg.Wait()

	if len(spans) != 2 || spans[0].who != "a" || spans[1].who != "b" {
		t.Fatalf("jobs ran: %+v", spans)
	}
	if !spans[0].end.Before(spans[1].began) {
		t.Errorf("a's jobs ran until %s after b's began", spans[0].end.Sub(spans[1].began))
	}
}

// holdingProxy forwards TCP connections to a Postgres server's unix
// socket and, while held, forwards nothing, leaving every connection
// open: to the server its client has gone quiet.
type holdingProxy struct {
	url  string
	mu   sync.Mutex
	cond *sync.Cond
	held bool
}

func newHoldingProxy(t *testing.T, db string) *holdingProxy {
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	sockets, _ := filepath.Glob(filepath.Join(u.Query().Get("host"), ".s.PGSQL.[0-9]*[0-9]"))
	if len(sockets) != 1 {
		t.Fatalf("the server's socket: %v", sockets)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdingProxy{}
	p.cond = sync.NewCond(&p.mu)
	t.Cleanup(func() { p.hold(false); _ = ln.Close() })
	q := u.Query()
	q.Del("host")
	u.Host, u.RawQuery = ln.Addr().String(), q.Encode()
	p.url = u.String()
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("unix", sockets[0])
			if err != nil {
				_ = client.Close()
				continue
			}
			go p.pipe(client, server)
			go p.pipe(server, client)
		}
	}()
	return p
}

// hold stops forwarding, or forwards again.
func (p *holdingProxy) hold(v bool) {
	p.mu.Lock()
	p.held = v
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *holdingProxy) pipe(from, to net.Conn) {
	defer from.Close()
	defer to.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		p.mu.Lock()
		for p.held {
			p.cond.Wait()
		}
		p.mu.Unlock()
		if n > 0 {
			if _, err := to.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
