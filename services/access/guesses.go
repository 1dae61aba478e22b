package access

import (
	"context"
	"fmt"
	"time"

	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"

	"toolbelt/models"
)

// KeyGuesses is how many wrong API keys one client address may send per
// window before its wrong keys are answered 429 instead of 401.
func KeyGuesses() limiter.Rate { return limiter.Rate{Period: time.Minute, Limit: 20} }

// guessLimiter slows brute-forcing of API keys: wrong keys count per
// client address; past the rate, a wrong key from that address is
// refused with 429 (and Retry-After) instead of 401 until the window
// ends. A right key is always accepted: keys are 256-bit, so guessing
// one is hopeless, and any process on a shared host could otherwise lock
// everyone behind the same address out by sending wrong keys.
type guessLimiter struct {
	store limiter.Store
	rate  limiter.Rate
}

// newGuessLimiter counts wrong keys in store, or in this process's memory
// when nil: the database's store shares the count between instances, so a
// guesser spreading its keys over them is stopped after the same number.
func newGuessLimiter(store limiter.Store, rate limiter.Rate) *guessLimiter {
	if store == nil {
		store = memory.NewStore()
	}
	return &guessLimiter{store: store, rate: rate}
}

// TooManyGuessesError says how long the client must wait.
type TooManyGuessesError struct{ RetryAfter int }

func (e *TooManyGuessesError) Error() string {
	return fmt.Sprintf("too many wrong API keys from this address; try again in %d s", e.RetryAfter)
}

func (e *TooManyGuessesError) Is(target error) bool { return target == models.ErrRateLimited }

// refuse counts a wrong key from client and returns why it is refused:
// unauthorized (the given error) while within the rate, too many guesses
// past it.
func (g *guessLimiter) refuse(ctx context.Context, client string, unauthorized error) error {
	lc, err := g.store.Increment(ctx, client, 1, g.rate)
	if err != nil || !lc.Reached {
		return unauthorized
	}
	return &TooManyGuessesError{RetryAfter: max(1, int(time.Until(time.Unix(lc.Reset, 0)).Seconds()+0.999))}
}
