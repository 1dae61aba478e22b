package models

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
)

// A lease goes to one of the instances asking at once; its holder renews
// it, others find it held and are told when it lapses; once it lapses the
// next to ask takes it and the former holder's renewal fails; a released
// lease is free at once. The lease is long, so it never lapses on its own
// however slow the machine; its lapse is written into the row, by the
// database's clock, as a holder that stopped renewing would leave it.
func TestLeaseHeldByOne(t *testing.T) {
	store := opened(t)(OpenPostgres(context.Background(), dbtest.Postgres(t)))
	ctx := context.Background()
	const ttl = time.Hour
	var won atomic.Int32
	var winner atomic.Value
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			holder := fmt.Sprintf("inst-%d#run", i)
			held, _, err := store.TakeLease(ctx, "leader", holder, ttl)
			if err != nil {
				t.Error(err)
			}
			if held {
				won.Add(1)
				winner.Store(holder)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d instances took the lease", won.Load())
	}
	first := winner.Load().(string)
	if ok, err := store.RenewLease(ctx, "leader", first, ttl); err != nil || !ok {
		t.Fatalf("the holder cannot renew: %v %v", ok, err)
	}
	if held, _, err := store.TakeLease(ctx, "leader", first, ttl); err != nil || !held {
		t.Fatalf("the holder cannot take its own lease again: %v %v", held, err)
	}
	held, left, err := store.TakeLease(ctx, "leader", "other#run", ttl)
	if err != nil || held || left <= 0 || left > ttl {
		t.Fatalf("another took a held lease: %v, %s left, %v", held, left, err)
	}
	if ok, _ := store.RenewLease(ctx, "leader", "other#run", ttl); ok {
		t.Fatal("another renewed the holder's lease")
	}

	// It lapses unrenewed: the next to ask takes it, the holder has lost it.
	if err := store.db.Exec("UPDATE leases SET until = now() - interval '1 second' WHERE name = 'leader'").Error; err != nil {
		t.Fatal(err)
	}
	if held, _, err := store.TakeLease(ctx, "leader", "other#run", ttl); err != nil || !held {
		t.Fatalf("the lapsed lease was not taken: %v %v", held, err)
	}
	if ok, err := store.RenewLease(ctx, "leader", first, ttl); err != nil || ok {
		t.Fatalf("the former holder renewed a lease it lost: %v %v", ok, err)
	}

	// Released, it is free at once.
	if err := store.ReleaseLease(ctx, "leader", first); err != nil { // not its own: no effect
		t.Fatal(err)
	}
	if held, _, _ := store.TakeLease(ctx, "leader", first, time.Minute); held {
		t.Fatal("a release by another let the lease go")
	}
	if err := store.ReleaseLease(ctx, "leader", "other#run"); err != nil {
		t.Fatal(err)
	}
	if held, _, err := store.TakeLease(ctx, "leader", first, time.Minute); err != nil || !held {
		t.Fatalf("a released lease is not free: %v %v", held, err)
	}
}

// An alert's state goes firing → posted → resolved → posted → gone, each
// post claimed by one instance; a post that failed is tried again; a
// resolution not posted yet is undone by a new firing, which posts
// nothing.
func TestAlertStatePostedOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, store *Store) {
		ctx := context.Background()
		at := time.Now().UTC().Truncate(time.Microsecond)
		state := func() AlertState {
			t.Helper()
			states, err := store.AlertStates(ctx, "r")
			if err != nil || len(states) > 1 {
				t.Fatalf("states %+v: %v", states, err)
			}
			if len(states) == 0 {
				return AlertState{}
			}
			return states[0]
		}
		claim := func(status string, at time.Time) int {
			t.Helper()
			var won atomic.Int32
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					ok, err := store.ClaimAlertPost(ctx, "r", "tool", status, at, at.Add(time.Minute))
					if err != nil {
						t.Error(err)
					}
					if ok {
						won.Add(1)
					}
				})
			}
			wg.Wait()
			return int(won.Load())
		}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(store.RaiseAlert(ctx, "r", "tool", at))
		must(store.RaiseAlert(ctx, "r", "tool", at.Add(time.Second))) // fires on: since unchanged
		if s := state(); s.Status != AlertFiring || !s.Since.Equal(at) || s.Notified != "" {
			t.Fatalf("raised: %+v", s)
		}
		if n := claim(AlertFiring, at); n != 1 {
			t.Fatalf("%d instances claimed the post", n)
		}
		if n := claim(AlertFiring, at.Add(59*time.Second)); n != 0 {
			t.Fatal("a claimed post was claimed again within its hold")
		}
		must(store.AlertPosted(ctx, "r", "tool", AlertFiring, false, at)) // the webhook failed
		if n := claim(AlertFiring, at); n != 1 {
			t.Fatal("a failed post is not claimed again")
		}
		must(store.AlertPosted(ctx, "r", "tool", AlertFiring, true, at))
		if s := state(); s.Notified != AlertFiring || s.PostingUntil != nil {
			t.Fatalf("posted: %+v", s)
		}
		if n := claim(AlertFiring, at.Add(time.Hour)); n != 0 {
			t.Fatal("a posted alert was claimed again")
		}

		// Resolved, then firing again before the resolution was posted:
		// nothing to post.
		must(store.ResolveAlert(ctx, "r", "tool", at))
		must(store.RaiseAlert(ctx, "r", "tool", at.Add(time.Minute)))
		if s := state(); s.Status != AlertFiring || !s.Since.Equal(at) || s.Notified != AlertFiring {
			t.Fatalf("fired again before its resolution was posted: %+v", s)
		}
		must(store.ResolveAlert(ctx, "r", "tool", at))
		if n := claim(AlertResolved, at); n != 1 {
			t.Fatalf("%d instances claimed the resolution", n)
		}
		must(store.AlertPosted(ctx, "r", "tool", AlertResolved, true, at))
		if s := state(); s.Rule != "" {
			t.Fatalf("a posted resolution is kept: %+v", s)
		}

		// Firing never posted, then resolved: gone, nothing to post.
		must(store.RaiseAlert(ctx, "r", "tool", at))
		must(store.ResolveAlert(ctx, "r", "tool", at))
		if s := state(); s.Rule != "" {
			t.Fatalf("an alert never posted is kept resolved: %+v", s)
		}
	})
}
