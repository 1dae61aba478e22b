package models

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A pending sign-in is taken by one of the callbacks naming it at once
// (instances racing, or a replay); an expired one by none; pruning
// removes only the expired.
func TestOIDCLoginTakenOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, store *Store) {
		ctx := context.Background()
		now := time.Now().UTC()
		for _, l := range []*OIDCLogin{
			{StateHash: "live", NonceHash: "n", VerifierHash: "v", Next: "/admin/tools", CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute)},
			{StateHash: "stale", NonceHash: "n", VerifierHash: "v", CreatedAt: now.Add(-time.Hour), ExpiresAt: now.Add(-time.Minute)},
		} {
			if err := store.CreateOIDCLogin(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		var took atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				l, err := store.TakeOIDCLogin(ctx, "live", time.Now().UTC())
				switch {
				case err == nil && l.Next == "/admin/tools":
					took.Add(1)
				case !errors.Is(err, ErrNotFound):
					t.Errorf("take: %v", err)
				}
			})
		}
		wg.Wait()
		if took.Load() != 1 {
			t.Fatalf("%d callbacks took the same sign-in, want 1", took.Load())
		}
		if _, err := store.TakeOIDCLogin(ctx, "stale", now); !errors.Is(err, ErrNotFound) {
			t.Fatalf("expired sign-in taken: %v", err)
		}
		if err := store.CreateOIDCLogin(ctx, &OIDCLogin{StateHash: "later", NonceHash: "n", VerifierHash: "v", CreatedAt: now, ExpiresAt: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if n, err := store.DeleteExpiredOIDCLogins(ctx, now); err != nil || n != 1 {
			t.Fatalf("pruned %d (%v), want the expired one", n, err)
		}
		if _, err := store.TakeOIDCLogin(ctx, "later", now); err != nil {
			t.Fatalf("a live sign-in was pruned: %v", err)
		}
	})
}
