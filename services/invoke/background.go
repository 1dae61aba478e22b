package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"

	"toolbelt/models"
	"toolbelt/services/ops"
)

// background runs calls that answered 202: asynchronous calls, and calls
// a reviewer approved. Each has a row in the history whose Request lets it
// run after a restart. Each runs on a goroutine of its own, counted in
// wg; helpers of a stream (watching a call's record, reading a result
// another instance sent) are counted in helpers. Close cancels ctx and
// waits for both.
type background struct {
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	helpers sync.WaitGroup
}

// help runs f on a goroutine Close waits for.
func (b *background) help(f func()) {
	b.helpers.Add(1)
	go func() {
		defer b.helpers.Done()
		f()
	}()
}

func newBackground() *background {
	ctx, cancel := context.WithCancel(context.Background())
	return &background{ctx: ctx, cancel: cancel}
}

// enqueue records an asynchronous call as queued and runs it in the
// background; the caller polls its URL. The cheap guards (resolve,
// validate, authorize) run first, so an unknown tool, bad arguments or a
// missing permission are answered at once; then the call reserves its
// place in its category's queue, so a caller past a waiting bound is
// answered QUEUE_FULL (429) now, not 202 and a refusal later. The whole
// chain runs again in the background.
func (inv *Invoker) enqueue(ctx context.Context, c *call) ToolResult {
	if res := inv.precheck(ctx, c); res.Error != nil {
		return inv.finish(ctx, c, res)
	}
	if res := inv.reserve(ctx, c); res != nil {
		return inv.finish(ctx, c, *res)
	}
	// The delivery of the result is stored before the call is answered:
	// acknowledged, it is kept (a delivery whose call a crash lost is
	// dropped at the next start).
	if cb := inv.newCallback(c); cb != nil {
		if err := inv.store.CreateCallback(ctx, cb); err != nil {
			inv.log.ErrorContext(ctx, "store callback", "err", err, "call_id", c.id)
			inv.unreserve(c.id)
			return inv.finish(ctx, c, storeFailure(err))
		}
	}
	res := ToolResult{CallID: c.id, Status: models.StatusQueued}
	_, res.record, res.committed = inv.record(ctx, c, res)
	inv.runLater(c.id, "")
	return res
}

// runLater runs a recorded call in the background, optionally consuming
// an approval. The queue place the call reserved when it was accepted is
// given up when it ends, if the call did not reach its queue.
func (inv *Invoker) runLater(callID, approvalID string) {
	inv.flight.bg.wg.Add(1)
	go func() {
		defer inv.flight.bg.wg.Done()
		defer inv.unreserve(callID)
		if err := inv.resume(inv.flight.bg.ctx, callID, approvalID); err != nil {
			inv.log.Error("run call in the background", "err", err, "call_id", callID)
		}
	}()
}

// resume claims a queued call and runs it through the whole chain again
// (permissions may have changed since), recording its result. A call
// another instance claimed first is left to it.
func (inv *Invoker) resume(ctx context.Context, callID, approvalID string) error {
	// The record may still be on its way to the database (just queued):
	// byID returns once it is there.
	rec, err := inv.recording.calls.byID(ctx, callID)
	if err != nil {
		return err
	}
	if rec.Status != models.StatusQueued {
		return nil
	}
	// The running record is committed before the chain runs: the approve
	// guard consumes the call's approval, and a crash after that must find
	// the call claimed (to be taken over), never queued as it was.
	if ok, err := inv.claim(ctx, callID); err != nil || !ok {
		return err
	}
	inv.cluster.claimed.Add(1)
	defer inv.cluster.claimed.Add(-1)
	inv.flight.count.Add(1)
	defer inv.flight.count.Add(-1)
	ctx, cancel := inv.track(ctx, callID)
	defer cancel()
	// A cancel asked before the call was tracked here (its message came
	// too early) is in the record.
	if asked, err := inv.store.CancelRequested(ctx, callID); err == nil && asked {
		cancel()
	}
	var req CallRequest
	if err := json.Unmarshal([]byte(rec.Request), &req); err != nil {
		c := &call{id: callID, timing: callTiming{started: time.Now(), created: rec.CreatedAt}, life: callLifecycle{tracked: true, claimed: true}}
		inv.finish(ctx, c, failure(models.CodeInternal, "internal error", false, "Call the tool again."))
		return fmt.Errorf("decode request of call %s: %w", callID, err)
	}
	req.Async = false
	// The agent was told its call runs: a database that does not answer
	// (a restart) while a guard checks it refuses the call UNAVAILABLE
	// with nothing run and nothing spent, so the chain is tried again
	// until the database answers, within unavailableFor.
	var c *call
	res, _ := backoff.Retry(ctx, func() (ToolResult, error) {
		c = &call{id: callID, req: req, timing: callTiming{started: time.Now(), created: rec.CreatedAt},
			review: callReview{id: approvalID}, life: callLifecycle{tracked: true, claimed: true}}
		res := inv.runAs(ctx, c, rec.PrincipalID)
		if res.Error != nil && res.Error.Code == models.CodeUnavailable && !c.life.began {
			return res, errUnavailable
		}
		return res, nil
	}, backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: 200 * time.Millisecond, RandomizationFactor: 0.2,
		Multiplier: 2, MaxInterval: 2 * time.Second}), backoff.WithMaxElapsedTime(unavailableFor))
	res = inv.finish(ctx, c, res)
	// Held (its lease renewed) until its end is committed, so no other
	// instance takes over a call that ended here.
	if err := inv.recording.calls.wait(context.WithoutCancel(ctx), res.committed); err != nil {
		return fmt.Errorf("record the end of call %s: %w", callID, err)
	}
	return nil
}

// unavailableFor is how long a background call waits for a database that
// does not answer before it ends UNAVAILABLE.
const unavailableFor = time.Minute

var errUnavailable = errors.New("the database does not answer")

// runAs runs a background call through the whole chain as its caller
// (who may have been deleted or disabled since it was queued).
func (inv *Invoker) runAs(ctx context.Context, c *call, caller uint) ToolResult {
	p, res := inv.callerNow(ctx, caller)
	if res != nil {
		return *res
	}
	c.caller = p
	return inv.guarded(ctx, c)
}

// callerNow reads a background call's caller as it is now: a refusal
// when it was deleted or disabled since the call was made (its approved,
// queued and waiting calls then never run, on any instance: each checks
// when the work would begin).
func (inv *Invoker) callerNow(ctx context.Context, id uint) (*models.Principal, *ToolResult) {
	p, err := inv.store.PrincipalByID(ctx, id)
	var res ToolResult
	switch {
	case errors.Is(err, models.ErrNotFound):
		res = failure(models.CodePermissionDenied, "the caller of this call no longer exists", false, "")
	case err != nil && ctx.Err() != nil:
		// Cancelled as the caller was read: a cancel asked between the
		// claim and the tracking of a background call cancels the read
		// itself, and the call ends as asked, not as a store failure.
		res = failure(models.CodeCancelled, "the call was cancelled", false, "")
	case err != nil:
		res = storeFailure(err)
	case p.DisabledAt != nil:
		res = failure(models.CodePermissionDenied, "the caller of this call was disabled", false, "")
	default:
		return p, nil
	}
	return nil, &res
}

// stoppedBeforeBegin is the result of a synchronous call the server
// stopped before its tool began (waiting for its category's queue):
// refused, as nothing ran, and retryable.
func stoppedBeforeBegin() ToolResult {
	res := refusal(models.CodeUnavailable, "the server stopped before this call's tool began: it did not run",
		"Call the tool again in a few seconds: nothing was done.")
	res.Error.Retryable, res.Error.RetryAfter = true, 2
	return res
}

// interrupted is the result of a call the server stopped while it ran.
func interrupted() ToolResult {
	res := failure(models.CodeInternal, "the server stopped while this call ran", true, "Call the tool again if the task still needs it.")
	res.Status = models.StatusInterrupted
	return res
}

// Shutdown lets the calls in flight (answered synchronously or running in
// the background) finish until ctx ends, then cancels the rest and records
// them as interrupted. It returns once every call has ended and its record
// is written (or after a further grace of 10 s for tools slow to stop).
// Close follows, once Run ended.
func (inv *Invoker) Shutdown(ctx context.Context) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for inv.flight.count.Load() > 0 && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	if n := inv.flight.count.Load(); n > 0 {
		inv.log.Warn("shutdown deadline passed: interrupting calls", "calls", n)
		inv.flight.interrupting.Store(true)
		inv.flight.running.Range(func(_, cancel any) bool {
			cancel.(context.CancelFunc)()
			return true
		})
		inv.flight.bg.cancel()
		grace := time.Now().Add(10 * time.Second)
		for inv.flight.count.Load() > 0 && time.Now().Before(grace) {
			<-tick.C
		}
	}
	inv.waitBackground(context.Background())
}

// waitBackground waits for the background calls to end, cancelling those
// still running when ctx ends.
func (inv *Invoker) waitBackground(ctx context.Context) {
	done := make(chan struct{})
	go func() { inv.flight.bg.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		inv.flight.bg.cancel()
		<-done
	}
}

// Close cancels background calls still running after ctx ends, waits for
// them to be recorded, and closes the call journal. It comes after Run
// ended, or when the invoker never ran.
func (inv *Invoker) Close(ctx context.Context) {
	inv.waitBackground(ctx)
	inv.flight.bg.cancel()
	inv.flight.bg.helpers.Wait()
	inv.recording.calls.close()
}

// Recover runs at start: the records a crash kept only in the journal
// are written, then the background calls nobody holds are taken over as
// runClaims does (the same claim): queued ones run, those whose tool had
// begun end interrupted, those claimed but not begun run again. The
// claims of this instance's earlier run are void at once; on SQLite,
// every claim is. The app recovers in Run, before it serves.
func (inv *Invoker) Recover(ctx context.Context) error {
	restored, err := inv.recording.calls.replay(ctx)
	if err != nil {
		return err
	}
	if restored > 0 {
		inv.log.Info("calls restored from the journal", "calls", restored)
	}
	return inv.takeOver(ctx, true)
}

// Approvals lists approvals in a state (pending when empty; "all" for
// every state), newest first.
func (inv *Invoker) Approvals(ctx context.Context, status string) ([]models.Approval, error) {
	if err := inv.expire(ctx); err != nil {
		return nil, err
	}
	switch status {
	case "":
		status = models.ApprovalPending
	case "all":
		status = ""
	case models.ApprovalPending, models.ApprovalApproved, models.ApprovalDenied, models.ApprovalExpired, models.ApprovalUsed:
	default:
		return nil, models.ErrInvalid.Errorf("status %q is not pending, approved, denied, expired, used or all", status)
	}
	return inv.store.Approvals(ctx, status, 500)
}

// Decide approves or denies a pending approval. A reviewer may not decide
// a call they made. An approved call is queued to run; a denied one ends
// with CONFIRMATION_DENIED and the reason as the suggestion.
func (inv *Invoker) Decide(ctx context.Context, reviewer *models.Principal, id string, approve bool, reason string) (*models.Approval, error) {
	reason = strings.TrimSpace(reason)
	if len(reason) > 1000 {
		return nil, &models.ValidationError{What: "decision", Problems: []models.Problem{{Pointer: "/reason", Message: "is longer than 1000 characters"}}}
	}
	if !approve && reason == "" {
		return nil, &models.ValidationError{What: "decision", Problems: []models.Problem{{Pointer: "/reason", Message: "is required when denying: it tells the agent what to do instead"}}}
	}
	status := models.ApprovalDenied
	if approve {
		status = models.ApprovalApproved
	}
	action := models.AuditApprovalDeny
	if approve {
		action = models.AuditApprovalApprove
	}
	var a *models.Approval
	err := inv.store.Audited(ctx, action, func(tx *models.Store) (string, string, error) {
		var err error
		a, err = tx.DecideApproval(ctx, id, status, reason, reviewer.ID, func(a *models.Approval) error {
			if a.PrincipalID == reviewer.ID {
				return models.ErrForbidden.Errorf("you made this call; another reviewer must decide it")
			}
			return nil
		})
		if err != nil {
			return "", "", err
		}
		detail := fmt.Sprintf("call %s of %s by principal %d", a.CallID, a.Tool, a.PrincipalID)
		if reason != "" {
			detail += "; reason: " + reason
		}
		return "approval:" + a.ID, detail, nil
	})
	if err != nil {
		if errors.Is(err, models.ErrConflict) {
			_ = inv.expire(ctx)
		}
		return nil, err
	}
	inv.log.InfoContext(ctx, "approval decided", "approval_id", a.ID, "call_id", a.CallID, "status", a.Status, "by", reviewer.Name)
	inv.metrics.Decided(a.Status)
	if approve {
		// Queued by the decision: claimed here, or by whichever instance
		// takes it first (once).
		inv.runLater(a.CallID, a.ID)
		return a, nil
	}
	suggestion := "A reviewer denied this call: " + reason + ". Do not retry it; tell the user or take another way."
	return a, inv.endCall(ctx, a.CallID, models.CodeConfirmationDenied, "a reviewer denied the call", suggestion)
}

// expire ends the calls whose approval ran out of time.
func (inv *Invoker) expire(ctx context.Context) error {
	expired, err := inv.store.ExpireApprovals(ctx, time.Now().UTC())
	if err != nil {
		return err
	}
	for _, a := range expired {
		inv.metrics.Decided(models.ApprovalExpired)
		if err := inv.endCall(ctx, a.CallID, models.CodeConfirmationDenied, "no reviewer approved the call in time",
			"The approval expired. Call the tool again if the task still needs it."); err != nil {
			return err
		}
	}
	return nil
}

// endCall records a waiting call as failed with code.
func (inv *Invoker) endCall(ctx context.Context, callID, code, msg, suggestion string) error {
	rec, err := inv.recording.calls.byID(ctx, callID)
	if err != nil {
		return err
	}
	res := failure(code, msg, false, suggestion)
	res.CallID = callID
	res.Metadata.ToolVersion = rec.Version
	raw, _ := json.Marshal(res)
	now := time.Now().UTC()
	rec.Status, rec.ErrorCode, rec.Result, rec.Request, rec.FinishedAt = models.StatusFailed, code, string(raw), "", &now
	if err := inv.recording.calls.saveNow(ctx, rec); err != nil {
		return err
	}
	inv.publish(callID, "status", statusEvent{models.StatusFailed})
	inv.publish(callID, "result", res)
	inv.callEnded(ctx, callID, raw)
	return nil
}

// SweepApprovals expires approvals every interval until ctx ends.
func (inv *Invoker) SweepApprovals(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := inv.expire(ctx); err != nil {
				inv.log.Error("expire approvals", "err", err)
			}
		}
	}
}

// Cancel stops a call: one running is cancelled through its context (it
// ends CANCELLED) by whichever instance runs it; one queued that no
// instance claimed yet ends at once, as does one awaiting approval, whose
// approval can no longer be decided. Agents cancel only their own calls.
func (inv *Invoker) Cancel(ctx context.Context, caller *models.Principal, id string) error {
	rec, err := inv.CallRecord(ctx, caller, id)
	if err != nil {
		return err
	}
	if err := inv.cancel(ctx, rec); err != nil {
		return err
	}
	// Recorded once the cancel is asked: it ends in the call's own record
	// (as CANCELLED), on whichever instance runs it.
	return inv.store.Audited(ctx, models.AuditCallCancel, func(*models.Store) (string, string, error) {
		return "call:" + id, fmt.Sprintf("%s of principal %d, %s", rec.Tool, rec.PrincipalID, rec.Status), nil
	})
}

func (inv *Invoker) cancel(ctx context.Context, rec *models.Call) (err error) {
	id := rec.ID
	if cancel, ok := inv.flight.running.Load(id); ok {
		cancel.(context.CancelFunc)()
		return nil
	}
	switch rec.Status {
	case models.StatusAwaitingApproval:
		if err := inv.store.CancelApprovalsOf(ctx, id); err != nil {
			return err
		}
		return inv.endCall(ctx, id, models.CodeCancelled, "the call was cancelled", "")
	case models.StatusQueued:
		if ended, err := inv.cancelQueued(ctx, rec); err != nil || ended {
			return err
		}
		fallthrough // claimed meanwhile
	case models.StatusRunning:
		if asked, err := inv.cancelElsewhere(ctx, id); err != nil || asked {
			return err
		}
		if rec, err = inv.store.CallByID(ctx, id); err != nil {
			return err
		}
	}
	return models.ErrConflict.Errorf("call %s is %s and can no longer be cancelled", id, rec.Status)
}

// ReportPendingApprovals exposes the number of approvals waiting for a
// reviewer as a gauge read at scrape time.
func (inv *Invoker) ReportPendingApprovals(m *ops.Metrics) {
	m.Gauge("toolbelt_approvals_pending", "Approvals waiting for a reviewer.", func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n, err := inv.store.CountPendingApprovals(ctx, time.Now())
		if err != nil {
			return -1
		}
		return float64(n)
	})
}
