package invoke

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"toolbelt/models"
	"toolbelt/services/access"
)

// MaxResultRecord caps the result kept in history.
const MaxResultRecord = 64 << 10

// record stores the call in history with its arguments redacted and its
// (already redacted) result.
//
// It returns the result's JSON when the record holds all of it, the
// record, and the channel that receives the result of its write.
func (inv *Invoker) record(ctx context.Context, c *call, res ToolResult) ([]byte, *models.Call, <-chan error) {
	rec, encoded := inv.callRecord(c, res)
	if res.Status == models.StatusQueued || res.Status == models.StatusRunning {
		rec.Request = inv.requestJSON(c)
		rec.FinishedAt = nil
	}
	committed := inv.recording.calls.save(ctx, rec)
	inv.publish(c.id, "status", statusEvent{res.Status})
	if models.Terminal(res.Status) {
		inv.publish(c.id, "result", res)
	}
	return encoded, rec, committed
}

// statusEvent is the data of a status event.
type statusEvent struct {
	Status string `json:"status"`
}

// CallAcknowledged runs a call for someone who is answered with it (the
// API, MCP, the console) and returns once its record survives a crash
// (journaled, committed, or spooled: see callRecorder), so every call
// answered is kept; the call itself never waits for that. A call that ran
// but whose record could not be made durable even so is answered
// StatusUnrecorded, with CodeNotRecorded and the tool's result (see
// notRecorded), never as if it were kept; one accepted for later (queued,
// awaiting approval) is not answered: the error says so.
//
// A callback_url that may not receive the result is refused first, with
// ErrInvalid.
func (inv *Invoker) CallAcknowledged(ctx context.Context, caller *models.Principal, req CallRequest) (ToolResult, error) {
	if err := inv.checkCallback(req); err != nil {
		return ToolResult{}, err
	}
	res := inv.Call(ctx, caller, req)
	if err := inv.acknowledge(ctx, res); err != nil {
		if res.Status == models.StatusAwaitingApproval || res.Status == models.StatusQueued {
			return res, fmt.Errorf("record call %s: %w", res.CallID, err)
		}
		if res.Status == models.StatusRefused { // nothing ran: the refusal is the whole answer
			inv.log.WarnContext(ctx, "refused call not recorded", "call_id", res.CallID, "err", err)
			return res, nil
		}
		inv.log.ErrorContext(ctx, "call ran but could not be recorded", "call_id", res.CallID, "status", res.Status, "err", err)
		return notRecorded(res, err), nil
	}
	return res, nil
}

// acknowledge returns once the record of res survives a crash, or with
// the error that kept it from it.
func (inv *Invoker) acknowledge(ctx context.Context, res ToolResult) error {
	if res.committed == nil {
		return nil
	}
	return inv.recording.calls.durable(ctx, res.record, res.committed)
}

// notRecorded is the answer to a call that ran but whose record could not
// be made durable (err): its data as the tool returned it, so the agent
// does not run its effect again, and CodeNotRecorded saying what happened
// (the tool's own outcome, and a full disk when that is the cause).
func notRecorded(res ToolResult, err error) ToolResult {
	cause := "the database and the local spool both refused it"
	if disk := models.FullDisk(err); disk != "" {
		cause = disk + " is full"
	}
	msg := fmt.Sprintf("the tool ran (%s) but Toolbelt could not record the call: %s", res.Status, cause)
	if res.Error != nil {
		msg += fmt.Sprintf("; the tool's own error was %s: %s", res.Error.Code, res.Error.Message)
	}
	out := res
	out.encoded, out.record, out.committed = nil, nil, nil
	out.Status = models.StatusUnrecorded
	out.Error = &ToolError{Code: models.CodeNotRecorded, Message: msg, Retryable: false,
		Suggestion: "Do not call the tool again for this step: it already ran, and its result is in data. The call is missing from the history; tell an administrator."}
	return out
}

// callRecord is the history row of a call and its result; a result over
// MaxResultRecord keeps its status and error but not its data.
func (inv *Invoker) callRecord(c *call, res ToolResult) (*models.Call, []byte) {
	// The decoded arguments re-encoded (canonical, no escapes) when the
	// call got that far; the bytes as sent otherwise.
	args := c.req.Arguments
	switch {
	case c.outcome.redactedArgs != "":
		args = json.RawMessage(c.outcome.redactedArgs)
	case c.args != nil:
		args, _ = json.Marshal(c.args)
	case len(bytes.TrimSpace(args)) == 0:
		args = json.RawMessage(`{}`)
	}
	// The recorder redacts the arguments before the record is read or
	// stored, off the call path.
	argsJSON := []byte(args)
	if len(argsJSON) > MaxResultRecord {
		argsJSON = []byte(`{"truncated":true}`)
	}
	res.encoded = nil // encode this result, not an earlier one
	resJSON := res.JSON()
	encoded := resJSON
	if len(resJSON) > MaxResultRecord {
		summary := res
		summary.Data = json.RawMessage(`{"truncated":true}`)
		resJSON, encoded = summary.JSON(), nil
	}
	now := time.Now().UTC()
	rec := &models.Call{
		ID: c.id, SessionID: c.req.SessionID, Tool: c.req.Tool, Version: c.def.Version,
		Arguments: string(argsJSON), Status: res.Status, Result: string(resJSON),
		Attempts: c.timing.attempts, Cached: c.outcome.cached, QueueMs: c.timing.queueMs, RunMs: c.timing.runMs, TotalMs: time.Since(c.timing.started).Milliseconds(),
		CreatedAt: c.timing.started.UTC(), FinishedAt: &now, PrincipalID: principalID(c.caller), ParentID: c.lineage.parent,
	}
	if c.outcome.redactedArgs != "" {
		rec.Prepared = true
	}
	if !c.timing.created.IsZero() {
		rec.CreatedAt = c.timing.created
		rec.TotalMs = time.Since(c.timing.created).Milliseconds()
	}
	if res.Status == models.StatusAwaitingApproval {
		rec.FinishedAt = nil
	}
	// A cache hit records no stages: it is the history's hot path, whose
	// rows then stay plain (BenchmarkCachedVsBareGin 0.51 against 0.48),
	// and its page says it was answered from the cache.
	if models.Terminal(res.Status) && !c.outcome.cached {
		rec.Stages = inv.stages(c)
	}
	if res.Error != nil {
		rec.ErrorCode = res.Error.Code
	}
	rec.ActedAs = c.outcome.actedAs
	return rec, encoded
}

// requestJSON is the call as sent, kept while it waits so it can run later.
func (inv *Invoker) requestJSON(c *call) string {
	raw, _ := json.Marshal(c.req)
	return string(raw)
}

// CallRecord returns a call of the history; an agent sees only its own.
func (inv *Invoker) CallRecord(ctx context.Context, caller *models.Principal, id string) (*models.Call, error) {
	rec, err := inv.recording.calls.byID(ctx, id)
	if err != nil {
		return nil, err
	}
	if caller != nil && caller.Role == access.RoleAgent && rec.PrincipalID != caller.ID {
		return nil, models.ErrNotFound.Errorf("call %q", id)
	}
	return rec, nil
}

// History returns one page of calls; an agent sees only its own.
func (inv *Invoker) History(ctx context.Context, caller *models.Principal, f models.CallFilter) ([]models.Call, int64, error) {
	if f.Limit < 1 || f.Limit > 1000 {
		return nil, 0, models.ErrInvalid.Errorf("limit must be between 1 and 1000")
	}
	if f.Offset < 0 {
		return nil, 0, models.ErrInvalid.Errorf("offset must not be negative")
	}
	if caller != nil && caller.Role == access.RoleAgent {
		f.PrincipalID = caller.ID
	}
	inv.recording.calls.sync()
	return inv.store.Calls(ctx, f)
}
