package invoke

import (
	"context"
	"encoding/json"
	"time"

	"github.com/cenkalti/backoff/v5"

	"toolbelt/models"
)

// Several instances over one database run each background call once: the
// instance that claims a queued call (models.Store.ClaimCall) runs it and
// renews its lease while it does; the others hear of it through the Bus
// (cancel, stream) and take it over when the lease lapses (runClaims). A
// call taken over before its tool began is queued again and runs on
// whichever instance claims it; one whose tool had begun ends interrupted,
// since running a tool twice may do its effects twice.

// Bus carries messages between the instances over one database
// (services/cluster's Notices); nil for one instance on its own.
type Bus interface {
	SendMessage(ctx context.Context, topic, body string)
	OnMessage(topic string, fn func(body string))
}

// Topics of the invoker's messages.
const (
	// topicCancel asks the instance running a call (its id) to cancel it.
	topicCancel = "call.cancel"
	// topicWatch and topicUnwatch start and end an instance's interest in
	// a call's events; topicEvent carries one ("id name data").
	topicWatch   = "call.watch"
	topicUnwatch = "call.unwatch"
	topicEvent   = "call.event"
)

// Lease is how long a claim on a background call holds unless its owner
// renews it; ClaimsEvery is how often the owner renews its leases, and how
// often every instance looks for calls to take over. A call whose instance
// died is taken over within about Lease + ClaimsEvery.
const (
	Lease       = 5 * time.Second
	ClaimsEvery = time.Second
)

// joinCluster names this instance and makes it one of several over one
// database, exchanging messages on bus (nil: none to hear). Each run of an
// instance claims calls under its own name, instance#run, so a restarted
// instance takes the claims of its earlier run for dead at once.
func (inv *Invoker) joinCluster(instance string, bus Bus) {
	inv.cluster.instance = instance
	inv.cluster.owner = instance + "#" + models.NewID()
	inv.cluster.bus = bus
	if bus == nil {
		return
	}
	bus.OnMessage(topicCancel, func(id string) {
		if cancel, ok := inv.flight.running.Load(id); ok {
			cancel.(context.CancelFunc)()
		}
	})
	bus.OnMessage(topicWatch, func(id string) { inv.cluster.watches.add(id, 1) })
	bus.OnMessage(topicUnwatch, func(id string) { inv.cluster.watches.add(id, -1) })
	bus.OnMessage(topicEvent, inv.heardEvent)
}

// Owner is the name this run of the instance claims calls under.
func (inv *Invoker) Owner() string { return inv.cluster.owner }

// runClaims renews the leases of the calls this instance runs and takes
// over the calls of instances that died, every ClaimsEvery until ctx ends.
func (inv *Invoker) runClaims(ctx context.Context) {
	t := time.NewTicker(inv.cluster.claimsEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Held until their end is written, spooled ends included.
		if inv.cluster.claimed.Load() > 0 || inv.recording.calls.backed.Load() > 0 {
			if _, err := inv.store.RenewClaims(ctx, inv.cluster.owner, time.Now().Add(inv.cluster.lease)); err != nil && ctx.Err() == nil {
				inv.log.Warn("renew call claims", "err", err)
				inv.cluster.storeFailed.Store(time.Now().UnixNano())
			}
		}
		// A lease that lapsed while the database was unreachable says
		// nothing of its holder, which could not renew it either: claims
		// are taken for dead only once the database has answered here
		// for a whole lease, time for every live holder to renew.
		if time.Since(time.Unix(0, inv.cluster.storeFailed.Load())) < inv.cluster.lease {
			continue
		}
		if err := inv.takeOver(ctx, false); err != nil && ctx.Err() == nil {
			inv.log.Warn("take over calls", "err", err)
			inv.cluster.storeFailed.Store(time.Now().UnixNano())
		}
		inv.cluster.watches.prune(time.Now())
	}
}

// takeOver runs the queued calls nobody runs and takes over the calls
// whose claim lapsed. At start, the claims of this instance's earlier run
// are void too, and on SQLite (one process) every claim is.
func (inv *Invoker) takeOver(ctx context.Context, start bool) error {
	v := models.Void{Now: time.Now(), Self: inv.cluster.owner, Limit: 100}
	if start {
		v.Run, v.All = inv.cluster.instance+"#", !inv.store.Shared()
	}
	for {
		queued, ended, err := inv.store.TakeOverCalls(ctx, v, inv.takeoverOf)
		if err != nil {
			return err
		}
		for _, rec := range ended {
			inv.log.Warn("call taken over from a stopped instance", "call_id", rec.ID, "from", rec.ClaimedBy, "status", rec.Status)
			outcome := "interrupted"
			if rec.ErrorCode == models.CodeCancelled {
				outcome = "cancelled"
			}
			inv.metrics.TakenOver(outcome)
			inv.publish(rec.ID, "status", statusEvent{rec.Status})
			inv.publish(rec.ID, "result", json.RawMessage(rec.Result))
			inv.callEnded(ctx, rec.ID, []byte(rec.Result))
		}
		for _, rec := range queued {
			approval, err := inv.store.ApprovedApprovalOf(ctx, rec.ID)
			if err != nil {
				return err
			}
			if rec.ClaimedBy != "" {
				inv.log.Info("call taken over from a stopped instance before its tool began: running it here", "call_id", rec.ID, "from", rec.ClaimedBy)
				inv.metrics.TakenOver("requeued")
			}
			inv.runLater(rec.ID, approval)
		}
		if len(queued)+len(ended) > 0 && start {
			inv.log.Info("recovered calls", "ended", len(ended), "resumed", len(queued))
		}
		if len(queued)+len(ended) < v.Limit {
			return nil
		}
	}
}

// takeoverOf is what becomes of a running call whose claim lapsed: one
// claimed whose tool had not begun runs again (or ends cancelled, if that
// was asked); one whose tool had begun, or recorded running before claims
// existed, ends interrupted: it is never run twice.
func (inv *Invoker) takeoverOf(rec *models.Call) models.Takeover {
	if rec.ClaimedBy != "" && rec.StartedAt == nil {
		if !rec.CancelRequested {
			return models.Takeover{Requeue: true}
		}
		res := failure(models.CodeCancelled, "the call was cancelled", false, "")
		return takeoverEnd(rec, res)
	}
	res := failure(models.CodeInternal, "the server running this call stopped while its tool ran; it was not run again, since that could repeat what the tool did",
		true, "Check whether the tool's effect happened; call the tool again if the task still needs it.")
	res.Status = models.StatusInterrupted
	return takeoverEnd(rec, res)
}

func takeoverEnd(rec *models.Call, res ToolResult) models.Takeover {
	res.CallID = rec.ID
	res.Metadata.ToolVersion = rec.Version
	raw, _ := json.Marshal(res)
	return models.Takeover{Status: res.Status, ErrorCode: res.Error.Code, Result: string(raw)}
}

// claim makes the queued call id running on this instance's behalf;
// false when another instance claimed it first (or it ended).
func (inv *Invoker) claim(ctx context.Context, id string) (bool, error) {
	raw, _ := json.Marshal(ToolResult{CallID: id, Status: models.StatusRunning})
	ok, err := inv.store.ClaimCall(ctx, id, inv.cluster.owner, time.Now().Add(inv.cluster.lease), string(raw))
	if err != nil || !ok {
		return false, err
	}
	inv.publish(id, "status", statusEvent{models.StatusRunning})
	return true, nil
}

// start records that a claimed call's tool begins, before it does; an
// error result when this instance no longer holds the call (it must not
// run: another instance took it over) or the record cannot be written.
func (inv *Invoker) start(ctx context.Context, c *call) *ToolResult {
	// The caller may have been disabled while the call waited for its
	// queue's slot.
	if c.caller != nil {
		if _, res := inv.callerNow(ctx, c.caller.ID); res != nil {
			return res
		}
	}
	// Retried while the database does not answer (a restart), within a
	// lease: the call is held meanwhile, and once its lease lapsed the
	// store says whether this instance still holds it.
	ok, err := backoff.Retry(ctx, func() (bool, error) {
		return inv.store.StartCall(ctx, c.id, inv.cluster.owner, time.Now())
	}, backoff.WithBackOff(backoff.NewExponentialBackOff()), backoff.WithMaxElapsedTime(inv.cluster.lease))
	if err == nil && ok {
		c.life.began = true
		return nil
	}
	switch {
	case err == nil:
		c.life.lost = true
		inv.log.WarnContext(ctx, "call taken over by another instance before its tool began", "call_id", c.id)
	case ctx.Err() != nil: // cancelled before its tool began
		res := failure(models.CodeCancelled, "the call was cancelled", false, "")
		return &res
	default:
		inv.log.ErrorContext(ctx, "record call start", "err", err, "call_id", c.id)
	}
	res := failure(models.CodeInternal, "internal error", true, "Try again.")
	return &res
}

// begin makes the start of a synchronous call durable before its tool
// begins: its record running, held by this run of the instance as a
// claimed background call is (renewed while it runs; see runClaims). A
// crash from then on leaves the call in the history, ended interrupted
// by whichever instance takes it over, never missing. The record goes
// with the others of the moment (group commit; journaled on SQLite, and
// spooled when the database does not answer); when it cannot be made
// durable at all, the tool does not run and the call is refused
// NOT_RECORDED. On success the caller holds one claim (inv.claimed) until
// the tool ends.
func (inv *Invoker) begin(ctx context.Context, c *call) *ToolResult {
	rec, _ := inv.callRecord(c, ToolResult{CallID: c.id, Status: models.StatusRunning})
	now := time.Now().UTC()
	until := now.Add(inv.cluster.lease)
	rec.FinishedAt, rec.Stages = nil, ""
	rec.Hold, rec.ClaimedBy, rec.LeaseUntil, rec.StartedAt = true, inv.cluster.owner, &until, &now
	inv.cluster.claimed.Add(1)
	if err := inv.recording.calls.durable(ctx, rec, inv.recording.calls.save(ctx, rec)); err != nil {
		inv.cluster.claimed.Add(-1)
		inv.log.ErrorContext(ctx, "record call start", "err", err, "call_id", c.id)
		res := refusal(models.CodeNotRecorded, "the call's start could not be recorded, so its tool did not run", "Try again in a few seconds.")
		if disk := models.FullDisk(err); disk != "" {
			res = refusal(models.CodeStorageFull, disk+" is full: the call's start could not be recorded, so its tool did not run",
				"Try again once an administrator has freed space.")
		}
		res.Error.Retryable = true
		return &res
	}
	c.life.began = true
	return nil
}

// beginComposites records as begun the synchronous composites a step is
// part of (c, and those c is a step of), outermost first, as the step's
// tool is about to begin: a crash while the first step waited for its
// queue's slot leaves no composite recorded as having run.
func (inv *Invoker) beginComposites(ctx context.Context, c *call) *ToolResult {
	if c == nil || c.life.claimed || c.life.began {
		return nil
	}
	if res := inv.beginComposites(ctx, c.lineage.up); res != nil {
		return res
	}
	return inv.begin(ctx, c)
}

// cancelElsewhere asks for a running call to be cancelled by whichever
// instance runs it; false when it is not running.
func (inv *Invoker) cancelElsewhere(ctx context.Context, id string) (bool, error) {
	ok, err := inv.store.RequestCancel(ctx, id)
	if err != nil || !ok {
		return false, err
	}
	if inv.cluster.bus != nil {
		inv.cluster.bus.SendMessage(ctx, topicCancel, id)
	}
	return true, nil
}

// cancelQueued ends a queued call cancelled, unless an instance claimed
// it meanwhile (false: cancel it running).
func (inv *Invoker) cancelQueued(ctx context.Context, rec *models.Call) (bool, error) {
	res := failure(models.CodeCancelled, "the call was cancelled", false, "")
	res.CallID = rec.ID
	res.Metadata.ToolVersion = rec.Version
	raw, _ := json.Marshal(res)
	now := time.Now().UTC()
	end := *rec
	end.Status, end.ErrorCode, end.Result, end.FinishedAt = models.StatusFailed, models.CodeCancelled, string(raw), &now
	end.TotalMs = now.Sub(rec.CreatedAt).Milliseconds()
	ok, err := inv.store.EndCallIf(ctx, &end, models.StatusQueued)
	if err != nil || !ok {
		return false, err
	}
	if err := inv.store.CancelApprovalsOf(ctx, rec.ID); err != nil {
		return true, err
	}
	inv.publish(rec.ID, "status", statusEvent{models.StatusFailed})
	inv.publish(rec.ID, "result", res)
	inv.callEnded(ctx, rec.ID, raw)
	return true, nil
}

// release hands back a claimed call whose tool had not begun when the
// shutdown cut it short: queued again, for another instance or the next
// start, rather than recorded interrupted.
func (inv *Invoker) release(c *call) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ok, err := inv.store.ReleaseCall(ctx, c.id, inv.cluster.owner)
	if err != nil {
		inv.log.Error("release call", "err", err, "call_id", c.id)
	}
	if ok {
		inv.log.Info("call released at shutdown before its tool began: queued for another instance", "call_id", c.id)
		inv.publish(c.id, "status", statusEvent{models.StatusQueued})
	}
	return ok
}
