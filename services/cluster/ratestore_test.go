package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/ulule/limiter/v3"
	redisstore "github.com/ulule/limiter/v3/drivers/store/redis"

	"toolbelt/internal/dbtest"
	"toolbelt/models"
)

// A principal limited to N calls a minute gets exactly N, counted by two
// instances over Postgres with Redis configured: while Redis is down,
// after it comes back, and after a restart that lost every key in Redis.
// The key-guess counters are kept the same way.
func TestLimitsCountThroughRedisFaults(t *testing.T) {
	db, rs := dbtest.Postgres(t), dbtest.RedisServer(t)
	ctx := context.Background()
	instance := func() limiter.Store {
		store, err := models.OpenPostgres(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		client, err := OpenRedis(ctx, rs.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.Close(); _ = store.Close() })
		return LimiterStore(store, "limits")
	}
	a, b := instance(), instance()
	rate := limiter.Rate{Period: time.Minute, Limit: 5}
	const key = "web_fetch|7|5|60000"
	allowed := 0
	call := func(on limiter.Store) {
		t.Helper()
		lc, err := on.Get(ctx, key, rate)
		if err != nil {
			t.Fatalf("count a call: %v", err)
		}
		if !lc.Reached {
			allowed++
		}
	}
	call(a)
	call(b)
	rs.Stop()
	call(a)
	call(b)
	rs.Start()
	call(a)
	rs.Restart()
	for range 3 {
		call(b)
		call(a)
	}
	if allowed != int(rate.Limit) {
		t.Errorf("%d calls allowed in the window; want %d", allowed, rate.Limit)
	}
}

// BenchmarkLimiterStore is one rate-limit count, what a call with
// security.rateLimit (or a request with a wrong key) pays: in Postgres
// (rate_counts, where the counters are) and, for comparison, in Redis
// (ulule/limiter's Redis store, where they were before); one caller at a
// time, and 16 callers counting on one key at once (one principal's
// burst: on Postgres they queue for the row's lock).
func BenchmarkLimiterStore(b *testing.B) {
	ctx := context.Background()
	stores := []struct {
		name string
		open func(b *testing.B) limiter.Store
	}{
		{"postgres", func(b *testing.B) limiter.Store {
			store, err := models.OpenPostgres(ctx, dbtest.Postgres(b))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = store.Close() })
			return LimiterStore(store, "limits")
		}},
		{"redis", func(b *testing.B) limiter.Store {
			client, err := OpenRedis(ctx, dbtest.Redis(b))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = client.Close() })
			s, err := redisstore.NewStoreWithOptions(client, limiter.StoreOptions{Prefix: "toolbelt:limits", MaxRetry: limiter.DefaultMaxRetry})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
	rate := limiter.Rate{Period: time.Minute, Limit: 1 << 40}
	for _, s := range stores {
		b.Run(s.name, func(b *testing.B) {
			store := s.open(b)
			b.Run("serial", func(b *testing.B) {
				for b.Loop() {
					if _, err := store.Get(ctx, "web_fetch|7|60|60000", rate); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("16callers", func(b *testing.B) {
				b.SetParallelism(8) // 16 callers on 2 CPUs
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := store.Get(ctx, "web_fetch|7|60|60000", rate); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		})
	}
}
