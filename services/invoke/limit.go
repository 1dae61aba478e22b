package invoke

import (
	"context"
	"fmt"
	"time"

	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"

	"toolbelt/models"
)

// rateLimits counts calls per tool and principal (ulule/limiter): in
// memory, or in the store Deps.RateLimits gives (the database's, shared
// by every instance, so a limit is exact cluster-wide).
type rateLimits struct {
	store limiter.Store
	// outage counts in this process's memory while the shared store's
	// database does not answer (nil when store is memory already).
	outage limiter.Store
}

// newRateLimits counts in store, or in this process's memory when nil.
func newRateLimits(store limiter.Store) *rateLimits {
	if store == nil {
		return &rateLimits{store: memory.NewStore()}
	}
	return &rateLimits{store: store, outage: memory.NewStore()}
}

// get counts a call of key at rate: in the shared store, or, while its
// database does not answer, in this instance's memory (each instance
// then allows the limit on its own, until the database is back).
func (l *rateLimits) get(ctx context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	lc, err := l.store.Get(ctx, key, rate)
	if err != nil && l.outage != nil && models.Unavailable(err) {
		return l.outage.Get(ctx, key, rate)
	}
	return lc, err
}

// limit refuses a call beyond the tool's security.rateLimit for this
// principal, saying when to retry.
func (inv *Invoker) limit(next step) step {
	return func(ctx context.Context, c *call) ToolResult {
		rl := c.def.Security.RateLimit
		if rl == nil {
			return next(ctx, c)
		}
		var pid uint
		if c.caller != nil {
			pid = c.caller.ID
		}
		// The rate is part of the key, so a new version's limit starts fresh.
		key := fmt.Sprintf("%s|%d|%d|%d", c.def.Name, pid, rl.MaxCalls, rl.WindowMs)
		lc, err := inv.admission.limits.get(ctx, key, limiter.Rate{Period: time.Duration(rl.WindowMs) * time.Millisecond, Limit: int64(rl.MaxCalls)})
		if err != nil {
			inv.log.ErrorContext(ctx, "count a rate limit", "err", err, "call_id", c.id)
			return storeFailure(err)
		}
		if lc.Reached {
			inv.metrics.Limited(c.def.Name)
			wait := max(1, int(time.Until(time.Unix(lc.Reset, 0)).Seconds()+0.999))
			res := refusal(models.CodeRateLimit,
				fmt.Sprintf("%s allows %d calls per %s and you have made them", c.def.Name, rl.MaxCalls, time.Duration(rl.WindowMs)*time.Millisecond),
				fmt.Sprintf("Wait %d s before calling %s again, or do something else meanwhile.", wait, c.def.Name))
			res.Error.Retryable = true
			res.Error.RetryAfter = wait
			return res
		}
		return next(ctx, c)
	}
}
