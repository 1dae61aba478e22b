package invoke

import (
	"context"

	"toolbelt/models"
)

// Decision returns the approval a recorded call asked for (its reviewer's
// decision, when made), or nil when it needed none. The caller must have
// been allowed to read the call (CallRecord).
func (inv *Invoker) Decision(ctx context.Context, callID string) (*models.Approval, error) {
	return inv.store.ApprovalOfCall(ctx, callID)
}
