package cluster

import (
	"context"
	"time"

	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/common"

	"toolbelt/models"
)

// databaseRates is a ulule/limiter store over the database's rate_counts
// table: the counts several instances over one Postgres share when there
// is no Redis. One upsert a count, atomic on the row, so a limit is as
// exact as with Redis, only slower.
type databaseRates struct {
	store  *models.Store
	prefix string
	now    func() time.Time
}

func (d *databaseRates) name(key string) string { return d.prefix + ":" + key }

// Get counts one event and returns the limit's state after it.
func (d *databaseRates) Get(ctx context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	return d.Increment(ctx, key, 1, rate)
}

// Increment counts count events.
func (d *databaseRates) Increment(ctx context.Context, key string, count int64, rate limiter.Rate) (limiter.Context, error) {
	now := d.now()
	n, until, err := d.store.IncrementRate(ctx, d.name(key), count, rate.Period, now)
	if err != nil {
		return limiter.Context{}, err
	}
	return common.GetContextFromState(now, rate, until, n), nil
}

// Peek returns the limit's state without counting.
func (d *databaseRates) Peek(ctx context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	now := d.now()
	n, until, err := d.store.PeekRate(ctx, d.name(key), now)
	if err != nil {
		return limiter.Context{}, err
	}
	if until.IsZero() {
		until = now.Add(rate.Period)
	}
	return common.GetContextFromState(now, rate, until, n), nil
}

// Reset forgets the key's window.
func (d *databaseRates) Reset(ctx context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	if err := d.store.ResetRate(ctx, d.name(key)); err != nil {
		return limiter.Context{}, err
	}
	now := d.now()
	return common.GetContextFromState(now, rate, now.Add(rate.Period), 0), nil
}
