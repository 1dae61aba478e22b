package services

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"

	"toolbelt/models"
)

// KeyGuesses is how many wrong API keys one client address may send per
// window before it is refused without its keys being checked.
var KeyGuesses = limiter.Rate{Period: time.Minute, Limit: 20}

// guessLimiter slows brute-forcing of API keys: wrong keys count per
// client address; past the rate, every request from that address is
// refused (429) until the window ends, right keys included.
type guessLimiter struct {
	store limiter.Store
	rate  limiter.Rate
	// lastWrong is when the last wrong key came (unix ns): a window after
	// it nobody can be blocked, and right keys skip the store.
	lastWrong atomic.Int64
}

func newGuessLimiter(rate limiter.Rate) *guessLimiter {
	return &guessLimiter{store: memory.NewStore(), rate: rate}
}

// TooManyGuessesError says how long the client must wait.
type TooManyGuessesError struct{ RetryAfter int }

func (e *TooManyGuessesError) Error() string {
	return fmt.Sprintf("too many wrong API keys from this address; try again in %d s", e.RetryAfter)
}

func (e *TooManyGuessesError) Is(target error) bool { return target == models.ErrRateLimited }

func (g *guessLimiter) blocked(ctx context.Context, client string) error {
	if time.Since(time.Unix(0, g.lastWrong.Load())) > g.rate.Period {
		return nil
	}
	lc, err := g.store.Peek(ctx, client, g.rate)
	if err != nil || lc.Remaining > 0 {
		return nil
	}
	return &TooManyGuessesError{RetryAfter: max(1, int(time.Until(time.Unix(lc.Reset, 0)).Seconds()+0.999))}
}

func (g *guessLimiter) wrong(ctx context.Context, client string) {
	g.lastWrong.Store(time.Now().UnixNano())
	_, _ = g.store.Increment(ctx, client, 1, g.rate)
}
