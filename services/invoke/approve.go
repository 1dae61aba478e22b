package invoke

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"toolbelt/models"
	"toolbelt/services/tooldef"
)

// approve holds dangerous and confirm-required calls for a human: the
// first time, the call is parked and an approval created (202); once a
// reviewer approves, the call runs again through the whole chain and
// consumes the approval here, if it still matches the tool version, the
// principal and the arguments.
func (inv *Invoker) approve(next step) step {
	return func(ctx context.Context, c *call) ToolResult {
		if c.review.preApproved {
			// A step of an approved composite: the approval covers it, and
			// the steps below it if it is a composite too.
			c.review.approvedRun = true
			return next(ctx, c)
		}
		needs := c.def.Security.Level == tooldef.LevelDangerous || c.def.Security.RequireConfirm ||
			(c.def.Runner.Kind == tooldef.RunnerComposite && inv.stepsNeedApproval(ctx, c.def, c.lineage.depth+1))
		if !needs {
			return next(ctx, c)
		}
		hash := argsHash(c.args)
		if c.review.id != "" {
			// A store that does not answer is not a mismatch: the call is
			// refused UNAVAILABLE, its approval unspent, and resume tries
			// the chain again once the database is back.
			a, err := inv.store.ApprovalByID(ctx, c.review.id)
			if err != nil && !errors.Is(err, models.ErrNotFound) {
				return storeFailure(err)
			}
			if err != nil || a.CallID != c.id || a.VersionID != c.version || a.ArgsHash != hash || a.PrincipalID != principalID(c.caller) {
				return refusal(models.CodeConfirmationRequired, "the approval does not match this call", "Call the tool again to ask for a new approval.")
			}
			ok, err := inv.store.UseApproval(ctx, a.ID, c.id)
			if err != nil {
				return storeFailure(err)
			}
			if !ok {
				return refusal(models.CodeConfirmationRequired, "the approval was already used or is not approved", "Call the tool again to ask for a new approval.")
			}
			c.review.approvedRun = true
			return next(ctx, c)
		}
		return inv.park(ctx, c, hash)
	}
}

// ApprovalTTL is how long a reviewer has to decide.
const ApprovalTTL = 15 * time.Minute

// park stores the call as awaiting approval, with a pending approval.
func (inv *Invoker) park(ctx context.Context, c *call, hash string) ToolResult {
	now := time.Now().UTC()
	a := &models.Approval{
		ID: models.NewID(), CallID: c.id, Tool: c.def.Name, Version: c.def.Version, VersionID: c.version,
		PrincipalID: principalID(c.caller), ArgsHash: hash, Arguments: string(inv.redactor.RedactJSON(c.req.Arguments)),
		Status: models.ApprovalPending, ExpiresAt: now.Add(ApprovalTTL),
	}
	// Not retryable: the call is kept and runs once approved, and calling
	// again would only ask for another approval of the same call.
	res := ToolResult{CallID: c.id, Status: models.StatusAwaitingApproval, Error: &ToolError{
		Code:       models.CodeConfirmationRequired,
		Message:    fmt.Sprintf("%s needs a reviewer's approval for this call", c.def.Name),
		Suggestion: fmt.Sprintf("Tell the user the call waits for approval (it expires at %s). %s for the result.", a.ExpiresAt.Format(time.RFC3339), models.DirectionsOf(ctx).PollCall(c.id)),
	}, Metadata: CallMetadata{ToolVersion: c.def.Version}}
	res.Data, _ = json.Marshal(map[string]string{"approval_id": a.ID})
	rec, _ := inv.callRecord(c, res)
	rec.Request = inv.requestJSON(c)
	rec.Arguments, rec.Prepared = a.Arguments, true
	err := inv.store.CreateApproval(ctx, a, rec, inv.newCallback(c), inv.admission.maxPending)
	if errors.Is(err, models.ErrRateLimited) {
		// One agent's calls must not bury the others' in the reviewers'
		// queue.
		inv.metrics.CapRefused("pending_approvals")
		res := refusal(models.CodeRateLimit, models.Detail(err),
			"Wait for a reviewer to decide the calls you have waiting (or cancel some), then call again.")
		res.Error.Retryable = true
		return res
	}
	if err != nil {
		inv.log.ErrorContext(ctx, "park call for approval", "err", err, "call_id", c.id)
		return storeFailure(err)
	}
	c.review.waiting = true
	inv.log.InfoContext(ctx, "call awaits approval", "call_id", c.id, "approval_id", a.ID, "tool", c.def.Name)
	return res
}

func argsHash(args map[string]any) string {
	canon, _ := json.Marshal(args)
	sum := sha256.Sum256(canon)
	var h [2 * sha256.Size]byte // on the stack: one allocation, the string
	hex.Encode(h[:], sum[:])
	return string(h[:])
}

// Decision returns the approval a recorded call asked for (its reviewer's
// decision, when made), or nil when it needed none. The caller must have
// been allowed to read the call (CallRecord).
func (inv *Invoker) Decision(ctx context.Context, callID string) (*models.Approval, error) {
	return inv.store.ApprovalOfCall(ctx, callID)
}
