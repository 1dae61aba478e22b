// Package callbacks delivers the results of calls that answered 202
// (async, or waiting for approval) to the callback_url their caller named:
// POSTed as the ToolResult, signed the Standard Webhooks way with the
// caller's secret (sign.go), retried with exponential backoff, refused by
// the egress policy of http_request, and recorded on the call. A delivery
// is stored when its call is accepted, so it survives a restart and
// resumes; it stops at its first 2xx. Retries are due times in a schedule
// (schedule.go): a worker makes one attempt and takes the next due
// delivery, never sleeping through a backoff, and no principal's
// deliveries hold more than their share of the workers.
package callbacks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"

	"toolbelt/models"
	"toolbelt/services/netpolicy"
	"toolbelt/services/ops"
)

// Settings bound a delivery's retries.
type Settings struct {
	// FirstWait is the wait after the first failed attempt; each wait
	// doubles (with 10% jitter either way) up to MaxWait.
	FirstWait time.Duration
	MaxWait   time.Duration
	// MaxAttempts and MaxTime (from the call's end) bound the attempts.
	MaxAttempts int
	MaxTime     time.Duration
	// Timeout is each attempt's, from connecting to reading the answer.
	Timeout time.Duration
	// Workers bounds the deliveries attempted at once, and WorkersEach
	// those of one principal among them, so one principal's slow or
	// failing receiver cannot hold every worker.
	Workers, WorkersEach int
	// Rescan is how often deliveries left open are looked for (a wake-up
	// missed, a call ended through a path that does not announce it).
	Rescan time.Duration
}

// Defaults are the settings of a server: 1 s, 2 s, 4 s … up to 10 min
// between attempts, at most 12 attempts within 24 h, 10 s each.
func Defaults() Settings {
	return Settings{FirstWait: time.Second, MaxWait: 10 * time.Minute, MaxAttempts: 12, MaxTime: 24 * time.Hour,
		Timeout: 10 * time.Second, Workers: 8, WorkersEach: 2, Rescan: 30 * time.Second}
}

// MaxURL is the longest callback URL accepted.
const MaxURL = 2048

// Deliverer posts the results of ended calls to their callback URLs. Run
// does the work; Due tells it a call ended.
type Deliverer struct {
	store   *models.Store
	secrets *Secrets
	policy  netpolicy.Policy
	client  *http.Client
	set     Settings
	log     *slog.Logger
	wake    chan string
	// started is when this run began: only deliveries stored before it
	// can belong to calls a crash lost.
	started time.Time

	// due are the pending deliveries by due time, taken by the workers.
	due *schedule
	// owner is the instance run deliveries are claimed under: every
	// instance delivers, one at a time each delivery
	// (models.Store.ClaimCallback).
	owner string
}

// claimMargin is how long past an attempt's Timeout its claim holds.
const claimMargin = 5 * time.Second

// errClaimed is a delivery another instance attempts.
var errClaimed = errors.New("another instance delivers this callback")

// claim holds the delivery for this run until a last attempt starting at
// from could have ended.
func (d *Deliverer) claim(ctx context.Context, callID string, from time.Time) error {
	ok, err := d.store.ClaimCallback(ctx, callID, d.owner, time.Now(), from.Add(d.set.Timeout+claimMargin))
	if err != nil {
		return err
	}
	if !ok {
		return errClaimed
	}
	return nil
}

// Deps is what a deliverer needs.
type Deps struct {
	Store *models.Store
	// Secrets sign the deliveries.
	Secrets *Secrets
	// Net is the egress policy: only what it allows is reached.
	Net      netpolicy.Policy
	Settings Settings
	Log      *slog.Logger
	// Instance names this instance; deliveries are claimed under it and
	// an id of this run.
	Instance string
	// Metrics, when set, counts the deliveries held back for their
	// principal's share.
	Metrics *ops.Metrics
}

// New returns a deliverer; Run does its work.
func New(d Deps) *Deliverer {
	client := d.Net.Client()
	// A redirect is not followed: a receiver answers where it was asked
	// (a 3xx is a failed attempt), so no redirect can take a signed result
	// elsewhere, to a refused address least of all.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Deliverer{store: d.Store, secrets: d.Secrets, policy: d.Net, client: client, set: d.Settings, log: d.Log,
		wake: make(chan string, 256), due: newSchedule(d.Settings.WorkersEach, d.Metrics), started: time.Now().UTC(),
		owner: cmp.Or(d.Instance, "toolbelt") + "#" + models.NewID()}
}

// Secrets are the principals' signing secrets.
func (d *Deliverer) Secrets() *Secrets { return d.secrets }

// Check says why raw may not receive callbacks, or "" when it may: an
// absolute http or https URL of at most MaxURL characters that the egress
// policy allows (the dialer checks the address again at each attempt).
func (d *Deliverer) Check(raw string) string {
	if len(raw) > MaxURL {
		return fmt.Sprintf("callback_url is longer than %d characters", MaxURL)
	}
	if u, err := url.Parse(raw); err != nil || !u.IsAbs() || u.Host == "" {
		return "callback_url must be an absolute http or https URL"
	}
	if msg := d.policy.CheckURL(raw); msg != "" {
		return "callback_url is refused: " + msg
	}
	return ""
}

// Due makes the delivery of an ended call due with its result (the
// ToolResult's JSON) and wakes Run; a call without a waiting delivery is
// left alone.
func (d *Deliverer) Due(ctx context.Context, callID string, result []byte) {
	ok, err := d.store.CallbackDue(ctx, callID, string(result), time.Now().UTC())
	if err != nil {
		// Left waiting: the next scan finds the call ended.
		d.log.ErrorContext(ctx, "callback not made due", "call_id", callID, "err", err)
		return
	}
	if ok {
		select {
		case d.wake <- callID:
		default: // the next scan finds it
		}
	}
}

// Run delivers until ctx ends: first what a previous run left open, then
// each delivery made due, and every Rescan what was missed. Workers take
// the deliveries whose time has come from the schedule, one attempt each.
// It returns once the attempts it started have stopped; one cut short
// stays pending, to resume at the next start.
func (d *Deliverer) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for range max(d.set.Workers, 1) {
		wg.Go(func() {
			for {
				cb, ok := d.due.next(ctx)
				if !ok {
					return
				}
				d.deliver(ctx, cb)
				d.due.done(cb)
			}
		})
	}
	d.scan(ctx, true, d.start)
	t := time.NewTicker(max(d.set.Rescan, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case id := <-d.wake:
			cb, err := d.store.CallbackOf(ctx, id)
			if err != nil {
				d.log.Error("load callback", "call_id", id, "err", err)
				continue
			}
			if cb.State == models.CallbackPending {
				d.start(ctx, *cb)
			}
		case <-t.C:
			d.scan(ctx, false, d.start)
		}
	}
}

// start schedules a pending delivery at its next attempt's time (now for
// a new one), claimed for this run until that attempt could have ended:
// an instance that finds it held by a live run leaves it to that run. A
// delivery scheduled or being attempted here already is left as it is.
func (d *Deliverer) start(ctx context.Context, cb models.Callback) {
	at := time.Now()
	if cb.NextAt != nil && cb.NextAt.After(at) {
		at = *cb.NextAt
	}
	if d.due.has(cb.CallID) {
		return
	}
	if err := d.claim(ctx, cb.CallID, at); err != nil {
		if !errors.Is(err, errClaimed) && ctx.Err() == nil {
			d.log.Error("claim callback", "call_id", cb.CallID, "err", err)
		}
		return
	}
	d.due.add(cb, at)
}

// scan starts the pending deliveries, and makes due the waiting ones whose
// call has ended (its end was recorded but not announced: a crash between
// the two, a call ended at start). At start (first), a waiting delivery
// of a previous run whose call is not recorded is dropped: its acceptance
// was lost (a call of this run may still be on its way to the database).
func (d *Deliverer) scan(ctx context.Context, first bool, start func(context.Context, models.Callback)) {
	open, err := d.store.OpenCallbacks(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Error("list open callbacks", "err", err)
		}
		return
	}
	for _, cb := range open {
		if cb.State == models.CallbackWaiting {
			rec, err := d.store.CallByID(ctx, cb.CallID)
			switch {
			case errors.Is(err, models.ErrNotFound) && first && cb.CreatedAt.Before(d.lostBefore()):
				_ = d.store.DropCallback(ctx, cb.CallID)
				continue
			case err != nil || !models.Terminal(rec.Status):
				continue
			}
			now := time.Now().UTC()
			if ok, err := d.store.CallbackDue(ctx, cb.CallID, rec.Result, now); err != nil || !ok {
				continue
			}
			cb.State, cb.Body, cb.EndedAt = models.CallbackPending, rec.Result, &now
		}
		start(ctx, cb)
	}
}

// lostBefore is the time before which a waiting delivery whose call is
// not recorded belongs to a call a crash lost. On one instance, that is
// this run's start; among several, another instance may have stored a
// delivery just now and be about to record its call, so a minute before.
func (d *Deliverer) lostBefore() time.Time {
	if d.store.Shared() {
		return d.started.Add(-time.Minute)
	}
	return d.started
}

// errGone is a receiver answering 410: it wants no more deliveries.
var errGone = errors.New("the receiver answered 410 Gone")

// deliver makes one attempt of a delivery whose time has come and
// records it: a success or a refusal for good ends it, as does the last
// attempt its bounds allow; otherwise its next attempt is scheduled after
// the backoff (or the receiver's Retry-After), held for this run until
// then. A delivery found past its bounds (the server was down) gets this
// one last attempt.
func (d *Deliverer) deliver(ctx context.Context, cb models.Callback) {
	if err := d.claim(ctx, cb.CallID, time.Now()); err != nil {
		switch {
		case errors.Is(err, errClaimed):
			d.log.Info("callback taken over by another instance", "call_id", cb.CallID)
		case ctx.Err() == nil:
			d.log.Error("claim callback", "call_id", cb.CallID, "err", err)
		}
		return
	}
	status, err := d.attempt(ctx, &cb)
	if ctx.Err() != nil {
		return // cut short: not counted, resumed at the next start
	}
	cb.Attempts++
	cb.LastStatus, cb.LastError = status, ""
	if err == nil {
		now := time.Now().UTC()
		cb.State, cb.DeliveredAt = models.CallbackDelivered, &now
		if err := d.store.SaveCallbackAttempt(ctx, &cb); err != nil {
			d.log.Error("record delivered callback", "call_id", cb.CallID, "err", err)
		}
		d.log.Info("callback delivered", "call_id", cb.CallID, "attempts", cb.Attempts, "status", cb.LastStatus)
		return
	}
	cb.LastError = err.Error()
	if wait, again := d.retryIn(&cb, err); again {
		at := time.Now().Add(wait).UTC()
		cb.NextAt = &at
		// Held until the next attempt has ended: no other instance
		// attempts it meanwhile, unless this one dies.
		if err := d.claim(ctx, cb.CallID, at); err != nil {
			d.log.Warn("hold callback until its next attempt", "call_id", cb.CallID, "err", err)
		}
		if err := d.store.SaveCallbackAttempt(ctx, &cb); err != nil {
			d.log.Error("record callback retry", "call_id", cb.CallID, "err", err)
			return // left pending: the next scan takes it again
		}
		d.due.add(cb, at)
		return
	}
	cb.State = models.CallbackFailed
	if err := d.store.SaveCallbackAttempt(ctx, &cb); err != nil {
		d.log.Error("record failed callback", "call_id", cb.CallID, "err", err)
	}
	d.log.Warn("callback failed", "call_id", cb.CallID, "attempts", cb.Attempts, "last_status", cb.LastStatus, "last_error", cb.LastError)
}

// retryIn says when a failed delivery is attempted again: FirstWait
// doubling with each attempt up to MaxWait (10% jitter either way), or
// the receiver's Retry-After; false when the failure is for good or the
// delivery's attempts or time are spent.
func (d *Deliverer) retryIn(cb *models.Callback, err error) (time.Duration, bool) {
	var permanent *backoff.PermanentError
	if errors.As(err, &permanent) || cb.Attempts >= d.set.MaxAttempts {
		return 0, false
	}
	wait := d.set.MaxWait
	if n := cb.Attempts - 1; n < 30 {
		wait = min(d.set.FirstWait<<n, d.set.MaxWait)
	}
	wait += time.Duration((rand.Float64()*0.2 - 0.1) * float64(wait))
	var after *backoff.RetryAfterError
	if errors.As(err, &after) {
		wait = after.Duration
	}
	if cb.EndedAt != nil && time.Since(*cb.EndedAt)+wait > d.set.MaxTime {
		return 0, false
	}
	return wait, true
}

// attempt POSTs the result once, signed, and returns the status the
// receiver answered (0 for none) and why it is not a success; errors that
// retrying cannot change are backoff.Permanent.
func (d *Deliverer) attempt(ctx context.Context, cb *models.Callback) (int, error) {
	secret, err := d.secrets.Of(ctx, cb.PrincipalID)
	if err != nil {
		return 0, backoff.Permanent(fmt.Errorf("signing secret: %w", err))
	}
	if msg := d.policy.CheckURL(cb.URL); msg != "" {
		return 0, backoff.Permanent(errors.New(msg)) // the policy changed since the call was accepted
	}
	body := []byte(cb.Body)
	ts := time.Now().Unix()
	sig, err := Sign(secret.Secret, cb.CallID, ts, body)
	if err != nil {
		return 0, backoff.Permanent(err)
	}
	ctx, cancel := context.WithTimeout(ctx, d.set.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cb.URL, strings.NewReader(cb.Body))
	if err != nil {
		return 0, backoff.Permanent(fmt.Errorf("build request: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Toolbelt-Callback/1")
	req.Header.Set(HeaderID, cb.CallID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, sig)
	resp, err := d.client.Do(req)
	if err != nil {
		if errors.Is(err, netpolicy.ErrAddressRefused) {
			return 0, backoff.Permanent(fmt.Errorf("the address is refused by the egress policy: %s", redactURL(err.Error(), cb.URL)))
		}
		return 0, errors.New(redactURL(err.Error(), cb.URL))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return code, nil
	case code == http.StatusGone:
		return code, backoff.Permanent(errGone)
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			s = min(s, int(d.set.MaxWait/time.Second)+1)
			return code, fmt.Errorf("answered %s: %w", resp.Status, backoff.RetryAfter(s))
		}
		return code, fmt.Errorf("answered %s", resp.Status)
	case code >= 300 && code < 400:
		return code, fmt.Errorf("answered %s: redirects are not followed", resp.Status)
	default:
		return code, fmt.Errorf("answered %s", resp.Status)
	}
}

// redactURL keeps a URL's query (which may carry a receiver's token) out
// of an error recorded on the call.
func redactURL(msg, raw string) string {
	if u, err := url.Parse(raw); err == nil && u.RawQuery != "" {
		u.RawQuery = "…"
		return strings.ReplaceAll(msg, raw, u.String())
	}
	return msg
}
