package callbacks

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"toolbelt/internal/poll"
	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/netpolicy"
)

var quiet = slog.New(slog.DiscardHandler)

// hostile is a delivery test's world: a flood principal and a victim
// principal, each with its receiver on loopback, and a deliverer over a
// real SQLite store.
type hostile struct {
	store          *models.Store
	flood, victim  *models.Principal
	set            Settings
	floodURL, vURL string
	// order is the principals whose deliveries reached a receiver, in the
	// order the attempts came in.
	mu    sync.Mutex
	order []string
}

func newHostile(t *testing.T, set Settings, flood http.HandlerFunc) *hostile {
	t.Helper()
	store, _ := modelstest.Store(t)
	h := &hostile{store: store, set: set}
	for i, name := range []string{"flood", "victim"} {
		p := &models.Principal{Name: name, Role: "agent"}
		if err := store.CreatePrincipal(context.Background(), p, &models.APIKey{Prefix: "tb_" + name, Hash: fmt.Sprintf("hash-%d", i)}); err != nil {
			t.Fatal(err)
		}
		if name == "flood" {
			h.flood = p
		} else {
			h.victim = p
		}
	}
	note := func(who string, next http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			h.mu.Lock()
			h.order = append(h.order, who)
			h.mu.Unlock()
			next(w, r)
		}
	}
	fs := httptest.NewServer(note("flood", flood))
	vs := httptest.NewServer(note("victim", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(vs.Close)
	t.Cleanup(fs.Close)
	h.floodURL, h.vURL = fs.URL+"/hook", vs.URL+"/hook"
	return h
}

// due stores a pending delivery of a call of p that ended.
func (h *hostile) due(t *testing.T, id string, p *models.Principal, url string) {
	t.Helper()
	h.accepted(t, id, p, url)
	if ok, err := h.store.CallbackDue(context.Background(), id, `{"status":"succeeded"}`, time.Now().UTC()); err != nil || !ok {
		t.Fatalf("make %s due: %v %v", id, ok, err)
	}
}

// accepted stores the delivery of a call of p accepted for later.
func (h *hostile) accepted(t *testing.T, id string, p *models.Principal, url string) {
	t.Helper()
	err := h.store.CreateCallback(context.Background(), &models.Callback{CallID: id, PrincipalID: p.ID, URL: url,
		State: models.CallbackWaiting, CreatedAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
}

// run runs a deliverer until the test ends.
func (h *hostile) run(t *testing.T) *Deliverer {
	d := New(Deps{Store: h.store, Secrets: NewSecrets(h.store, make([]byte, 32)), Log: quiet, Settings: h.set,
		Net: netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return d
}

// attempted counts the attempts that reached a receiver before the
// victim's first (all of them when it has none), and whether it had one.
func (h *hostile) attempted() (before int, victim bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, who := range h.order {
		if who == "victim" {
			return before, true
		}
		before++
	}
	return before, false
}

func settings(workers int) Settings {
	s := Defaults()
	s.Workers, s.Rescan, s.Timeout = workers, time.Hour, time.Minute
	return s
}

// A flood principal's 16 callbacks go to a receiver that hangs: they hold
// at most their share of the workers, so the victim's callback, made due
// once the flood's attempts hang, is attempted (and delivered) while they
// still hang, after a bounded number of the flood's attempts.
func TestSlowReceiverHoldsOnlyItsShare(t *testing.T) {
	hang := make(chan struct{})
	var inside, peak int
	var mu sync.Mutex
	set := settings(4)
	h := newHostile(t, set, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inside++
		peak = max(peak, inside)
		mu.Unlock()
		select {
		case <-hang:
		case <-r.Context().Done():
		}
		mu.Lock()
		inside--
		mu.Unlock()
	})
	defer close(hang)
	for i := range 16 {
		h.due(t, fmt.Sprintf("flood%02d", i), h.flood, h.floodURL)
	}
	d := h.run(t)
	poll.True(t, 20*time.Second, "the flood's attempts hanging", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return inside >= set.WorkersEach
	})
	// Accepted once the deliverer runs (one accepted before would belong
	// to a call a crash lost), and made due as its call ends.
	h.accepted(t, "victim", h.victim, h.vURL)
	started := time.Now()
	d.Due(context.Background(), "victim", []byte(`{"status":"succeeded"}`))
	poll.True(t, 20*time.Second, "the victim's callback delivered while the flood's receiver hangs", func() bool {
		cb, err := h.store.CallbackOf(context.Background(), "victim")
		return err == nil && cb.State == models.CallbackDelivered
	})
	before, _ := h.attempted()
	t.Logf("victim delivered after %s, behind %d of the flood's attempts (hanging)", time.Since(started).Round(time.Millisecond), before)
	mu.Lock()
	defer mu.Unlock()
	if before > set.WorkersEach || peak > set.WorkersEach {
		t.Errorf("%d of the flood's attempts came before the victim's, %d hung at once; its share is %d", before, peak, set.WorkersEach)
	}
}

// A flood principal's callbacks fail (500) with an hour's backoff: each
// gets its first attempt and is scheduled for later, no worker waiting
// through the backoff, so the victim's callback behind them is delivered
// with two workers in all (before, both workers slept through the flood's
// first backoff and the victim was never attempted).
func TestFailingReceiverFreesItsWorkers(t *testing.T) {
	set := settings(2)
	set.FirstWait, set.MaxWait = time.Hour, 2*time.Hour
	h := newHostile(t, set, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
	const floods = 16
	for i := range floods {
		h.due(t, fmt.Sprintf("flood%02d", i), h.flood, h.floodURL)
	}
	d := h.run(t)
	poll.True(t, 20*time.Second, "two of the flood's attempts failed", func() bool {
		n, _ := h.attempted()
		return n >= 2
	})
	h.accepted(t, "victim", h.victim, h.vURL)
	d.Due(context.Background(), "victim", []byte(`{"status":"succeeded"}`))
	poll.True(t, 20*time.Second, "the victim's callback delivered", func() bool {
		cb, err := h.store.CallbackOf(context.Background(), "victim")
		return err == nil && cb.State == models.CallbackDelivered
	})
	before, _ := h.attempted()
	t.Logf("victim delivered behind %d of the flood's failed attempts, with 2 workers", before)
	poll.True(t, 20*time.Second, "every flood delivery attempted once and scheduled again", func() bool {
		for i := range floods {
			cb, err := h.store.CallbackOf(context.Background(), fmt.Sprintf("flood%02d", i))
			if err != nil || cb.Attempts != 1 || cb.State != models.CallbackPending || cb.NextAt == nil {
				return false
			}
		}
		return true
	})
	cb, err := h.store.CallbackOf(context.Background(), "flood00")
	if err != nil || cb.NextAt.Before(time.Now().Add(50*time.Minute)) || cb.LastStatus != http.StatusInternalServerError {
		t.Errorf("flood00 after its failed attempt: %+v %v; want its next attempt in about an hour", cb, err)
	}
}
