package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/cenkalti/backoff/v5"

	"toolbelt/models"
	"toolbelt/services/runners"
	"toolbelt/services/tooldef"
)

// execute runs the tool, retrying retryable failures of retryable tools
// with exponential backoff.
func (inv *Invoker) execute(ctx context.Context, c *call) ToolResult {
	if c.life.claimed {
		// A background call: recorded as begun before it does, so no
		// other instance runs it again if this one dies.
		if res := inv.start(ctx, c); res != nil {
			return *res
		}
	} else {
		// A synchronous one: in the history before its tool begins. A
		// composite's tool is its steps: it begins with its first step's
		// tool (beginComposites), not while that step waits for a slot.
		if c.def.Runner.Kind == tooldef.RunnerComposite {
			defer func() {
				if c.life.began {
					inv.cluster.claimed.Add(-1)
				}
			}()
		} else {
			if res := inv.beginComposites(ctx, c.lineage.up); res != nil {
				return *res
			}
			if res := inv.begin(ctx, c); res != nil {
				return *res
			}
			defer inv.cluster.claimed.Add(-1)
		}
	}
	retries := 0
	if c.def.Execution.Retryable {
		retries = c.def.Execution.MaxRetries
	}
	c.log = inv.toolLogger(c)
	start := time.Now()
	res, n := withRetries(ctx, retries, inv.pipeline.sleep, func() ToolResult {
		c.timing.attempts++
		began := time.Now()
		res := inv.attempt(ctx, c)
		t := try{took: time.Since(began)}
		if res.Error != nil {
			t.code = res.Error.Code
		}
		c.timing.tries = append(c.timing.tries, t)
		if res.Error != nil {
			c.log.InfoContext(ctx, "tool attempt failed", "attempt", c.timing.attempts, "code", res.Error.Code, "retryable", res.Error.Retryable)
		}
		return res
	})
	c.timing.attempts, c.timing.runMs = n, time.Since(start).Milliseconds()
	return res
}

// toolLogger is the logger a tool writes to: every line carries the call
// id, the tool and the session.
func (inv *Invoker) toolLogger(c *call) *slog.Logger {
	log := inv.log
	if log == nil {
		log = slog.Default()
	}
	return log.With("call_id", c.id, "tool", c.def.Name, "session_id", c.req.SessionID)
}

// attempt runs the tool once within its timeout.
func (inv *Invoker) attempt(ctx context.Context, c *call) ToolResult {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(c.def.Execution.Timeout)*time.Millisecond)
	defer cancel()
	c.emit = func(event string, data any) { inv.publish(c.id, event, data) }
	if listen := listenerOf(ctx); listen != nil {
		c.emit = func(event string, data any) {
			inv.publish(c.id, event, data)
			listen(event, data)
		}
	}
	c.emit("attempt", map[string]int{"attempt": c.timing.attempts})
	if c.def.Runner.Kind == tooldef.RunnerComposite {
		return inv.composite(ctx, c)
	}
	// The call's own token, or none (a background call): never one its
	// context brought from elsewhere.
	rc := &runners.Call{ID: c.id, Def: c.def, Args: c.args,
		Session: c.req.SessionID, Dir: c.dir, Log: c.log, Emit: c.emit, Principal: c.caller, SubjectToken: c.req.SubjectToken}
	data, err := inv.runners.Run(runners.WithSubjectToken(ctx, c.req.SubjectToken), rc)
	if rc.ActedAs != "" {
		c.outcome.actedAs = rc.ActedAs
	}
	if ctx.Err() != nil {
		// A timeout is not retried, even for a retryable tool, unless the
		// tool says its timeouts pass (execution.retryTimeouts): a tool
		// that hung once would most likely hang again, holding its queue
		// slot for another whole timeout each time.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return failure(models.CodeTimeout, fmt.Sprintf("%s did not finish within %d ms", c.def.Name, c.def.Execution.Timeout), c.def.Execution.RetryTimeouts,
				"Do not repeat the same call at once: ask for less work (a smaller input, a narrower query), or try later.")
		}
		return failure(models.CodeCancelled, "the call was cancelled", false, "")
	}
	if err != nil {
		var te *runners.Error
		if errors.As(err, &te) && te.RetryAfter > 0 {
			res := refusal(te.Code, inv.redactor.Redact(te.Message), te.Suggestion)
			res.Error.Retryable, res.Error.RetryAfter = te.Retryable, te.RetryAfter
			return res
		}
		if errors.As(err, &te) {
			res := failure(te.Code, inv.redactor.Redact(te.Message), te.Retryable, te.Suggestion)
			res.Error.ConnectURL = te.ConnectURL
			return res
		}
		return failure(models.CodeExecutionFailed, inv.redactor.Redact(err.Error()), false, "Check the arguments and try again.")
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return failure(models.CodeInternal, "internal error", false, "")
	}
	// Output is redacted here, before the cache, the history or the caller
	// can see it.
	return ToolResult{Status: models.StatusSucceeded, Success: true, Data: inv.redactor.RedactJSON(raw)}
}

// Backoff for retries: 1 s, 2 s, 4 s… with up to 20% jitter.
const retryBase = time.Second

// retryBackOff is that backoff. backoff's jitter is symmetric, so its
// intervals are centred 10% above the base: 1.1 s ± 1/11 is 1 s to 1.2 s.
// The intervals are not capped: maxRetries bounds them (MaxRetries
// retries wait at most 512 s at the last).
func retryBackOff() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{
		InitialInterval:     retryBase + retryBase/10,
		RandomizationFactor: 1.0 / 11,
		Multiplier:          2,
		MaxInterval:         math.MaxInt64,
	}
}

// errRetryable tells backoff.Retry that an attempt may be retried.
var errRetryable = errors.New("retryable failure")

// withRetries runs attempt until it succeeds, fails for a reason that is
// not retryable, or maxRetries retries are spent, with retryBackOff
// between attempts. backoff.Retry decides when to retry and for how long
// to wait; sleep does the waiting, so tests can pass a fake one (Retry's
// own timer cannot be replaced).
func withRetries(ctx context.Context, maxRetries int, sleep func(context.Context, time.Duration) error, attempt func() ToolResult) (ToolResult, int) {
	n := 0
	wait := &sleepingBackOff{ctx: ctx, next: retryBackOff(), sleep: sleep}
	res, err := backoff.Retry(ctx, func() (ToolResult, error) {
		n++
		res := attempt()
		if res.Success || res.Error == nil || !res.Error.Retryable {
			return res, nil
		}
		return res, errRetryable
	}, backoff.WithBackOff(wait), backoff.WithMaxTries(uint(max(maxRetries, 0))+1), backoff.WithMaxElapsedTime(0))
	if wait.err != nil || (err != nil && !errors.Is(err, errRetryable)) {
		return failure(models.CodeCancelled, "the call was cancelled between retries", false, ""), n
	}
	return res, n
}

// sleepingBackOff waits out each interval of next with sleep and tells
// backoff.Retry to wait no longer; a wait cut short stops the retries.
type sleepingBackOff struct {
	ctx   context.Context
	next  backoff.BackOff
	sleep func(context.Context, time.Duration) error
	err   error // why a wait was cut short
}

func (b *sleepingBackOff) Reset() { b.next.Reset() }

func (b *sleepingBackOff) NextBackOff() time.Duration {
	d := b.next.NextBackOff()
	if d == backoff.Stop {
		return backoff.Stop
	}
	if b.err = b.sleep(b.ctx, d); b.err != nil {
		return backoff.Stop
	}
	return 0
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
