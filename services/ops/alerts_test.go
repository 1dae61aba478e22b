package ops

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
	"toolbelt/models"
	"toolbelt/models/modelstest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// An alert fires once per event, whichever instance checks: leader a
// posts it; b, leading after a (a fresh monitor, nothing in memory), does
// not post it again, and posts its resolution once; a, checking again as
// if woken from a freeze, posts nothing; two monitors checking at once
// post a new alert once; a post the webhook refused is posted at the next
// check, once.
func TestAlertFiresOncePerEventAcrossLeaders(t *testing.T) {
	modelstest.Each(t, func(t *testing.T, store *models.Store) {
		var mu sync.Mutex
		var posted []Alert
		refuse := 0 // how many posts the webhook refuses
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var al Alert
			raw, _ := io.ReadAll(r.Body)
			if err := json.Unmarshal(raw, &al); err != nil {
				t.Errorf("webhook body %s: %v", raw, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if refuse > 0 {
				refuse--
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			posted = append(posted, al)
		}))
		defer hook.Close()
		posts := func() []string {
			mu.Lock()
			defer mu.Unlock()
			var out []string
			for _, al := range posted {
				out = append(out, al.Tool+" "+al.Status)
			}
			return out
		}
		ctx := context.Background()
		clock := statsClock
		cfg := AlertConfig{Window: 15 * time.Minute, Threshold: 0.5, MinCalls: 10, Webhook: hook.URL, Every: time.Hour}
		monitor := func() *Alerts {
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			return NewAlerts(AlertsDeps{Store: store, Config: cfg, Metrics: NewMetrics(""), Log: log, Now: func() time.Time { return clock }})
		}
		check := func(a *Alerts) {
			t.Helper()
			if err := a.Check(ctx); err != nil {
				t.Fatal(err)
			}
		}
		want := func(what string, want ...string) {
			t.Helper()
			if got := posts(); !slices.Equal(got, want) {
				t.Fatalf("%s: posted %v, want %v", what, got, want)
			}
		}
		calls := func(tool, status string, n int) {
			for range n {
				saveStatCalls(t, store, statCall(tool, status, "", time.Minute, 10))
			}
		}
		calls("web_search", models.StatusFailed, 8)
		calls("web_search", models.StatusSucceeded, 2)

		a := monitor()
		check(a)
		want("a", "web_search firing")
		if len(a.Firing()) != 1 {
			t.Fatalf("a shows %v", a.Firing())
		}
		since := a.Firing()[0].Since

		// a dies or is frozen; b leads.
		b := monitor()
		clock = clock.Add(30 * time.Second)
		check(b)
		want("b, after a failover", "web_search firing")
		if f := b.Firing(); len(f) != 1 || !f[0].Since.Equal(since) {
			t.Fatalf("b shows %+v, want firing since %s", f, since)
		}

		// It clears: b posts the resolution, once.
		calls("web_search", models.StatusSucceeded, 10)
		clock = clock.Add(30 * time.Second)
		check(b)
		want("b, once it clears", "web_search firing", "web_search resolved")
		check(b)
		check(a) // a wakes, its memory stale
		want("b and a checking again", "web_search firing", "web_search resolved")
		if len(a.Firing())+len(b.Firing()) != 0 {
			t.Errorf("still shown: a %v, b %v", a.Firing(), b.Firing())
		}

		// Two instances checking at once (a leader that woke, before it
		// noticed): one post.
		calls("file_read", models.StatusFailed, 10)
		var wg sync.WaitGroup
		for _, m := range []*Alerts{a, b} {
			wg.Go(func() {
				if err := m.Check(ctx); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		want("a and b at once", "web_search firing", "web_search resolved", "file_read firing")

		// The webhook refuses a post: the next check posts it.
		mu.Lock()
		refuse = 1
		mu.Unlock()
		calls("file_write", models.StatusFailed, 10)
		check(b)
		want("the webhook refused", "web_search firing", "web_search resolved", "file_read firing")
		clock = clock.Add(30 * time.Second)
		check(b)
		check(b)
		want("the next checks", "web_search firing", "web_search resolved", "file_read firing", "file_write firing")
	})
}
