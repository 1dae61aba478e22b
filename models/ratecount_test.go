package models

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
)

// A window counts from its first event to its end, then starts again;
// peek does not count, reset forgets, prune removes only ended windows.
func TestRateCounts(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		t0 := time.UnixMilli(1_800_000_000_000)
		period := 10 * time.Second
		for i, want := range []int64{1, 2, 5} {
			by := int64(1)
			if i == 2 {
				by = 3
			}
			n, until, err := s.IncrementRate(ctx, "limits:a", by, period, t0.Add(time.Duration(i)*time.Second))
			if err != nil || n != want || !until.Equal(t0.Add(period)) {
				t.Fatalf("count %d: %d until %v (%v), want %d until %v", i, n, until, err, want, t0.Add(period))
			}
		}
		if n, until, err := s.PeekRate(ctx, "limits:a", t0.Add(9*time.Second)); err != nil || n != 5 || !until.Equal(t0.Add(period)) {
			t.Errorf("peek: %d %v %v", n, until, err)
		}
		// At the window's end a new one starts, counted from its first event.
		if n, until, err := s.IncrementRate(ctx, "limits:a", 1, period, t0.Add(period)); err != nil || n != 1 || !until.Equal(t0.Add(2*period)) {
			t.Errorf("after the window: %d until %v (%v)", n, until, err)
		}
		if n, _, _ := s.PeekRate(ctx, "limits:b", t0); n != 0 {
			t.Errorf("an unknown key peeks %d", n)
		}
		if _, _, err := s.IncrementRate(ctx, "limits:b", 1, period, t0); err != nil {
			t.Fatal(err)
		}
		if err := s.ResetRate(ctx, "limits:a"); err != nil {
			t.Fatal(err)
		}
		if n, _, _ := s.PeekRate(ctx, "limits:a", t0.Add(period)); n != 0 {
			t.Errorf("after reset: %d", n)
		}
		if n, err := s.PruneRates(ctx, t0.Add(period)); err != nil || n != 1 {
			t.Errorf("prune at the end of limits:b's window: %d %v, want 1", n, err)
		}
		if _, _, err := s.IncrementRate(ctx, "limits:c", 1, 0, t0); err == nil {
			t.Error("a window of 0 was accepted")
		}
	})
}

// Counting is atomic: callers racing on one key each see a count of their
// own, and none is lost (on Postgres, on several connections at once).
func TestRateCountsRace(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		const workers, each = 8, 25
		now := time.Now()
		seen := make([][]int64, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for range each {
					n, _, err := s.IncrementRate(context.Background(), "guesses:203.0.113.7", 1, time.Minute, now)
					if err != nil {
						t.Error(err)
						return
					}
					seen[w] = append(seen[w], n)
				}
			})
		}
		wg.Wait()
		var all []int64
		for _, s := range seen {
			all = append(all, s...)
		}
		slices.Sort(all)
		for i, n := range all {
			if n != int64(i+1) {
				t.Fatalf("counts %v: the %dth is %d", all, i+1, n)
			}
		}
		if len(all) != workers*each {
			t.Errorf("%d counts, want %d", len(all), workers*each)
		}
	})
}

// BenchmarkIncrementRate is one rate-limit count in the database, what a
// call with security.rateLimit pays on Postgres without Redis.
func BenchmarkIncrementRate(b *testing.B) {
	open := map[string]func() (*Store, error){
		"sqlite":   func() (*Store, error) { return Open(context.Background(), b.TempDir()+"/bench.db") },
		"postgres": func() (*Store, error) { return OpenPostgres(context.Background(), dbtest.Postgres(b)) },
	}
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			s, err := open[name]()
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			ctx := context.Background()
			for b.Loop() {
				if _, _, err := s.IncrementRate(ctx, "limits:bench", 1, time.Minute, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
