package invoke

import (
	"context"
	"time"

	"toolbelt/models"
)

// checkCallback refuses a request whose callback_url may not receive
// results, as a malformed request (ErrInvalid, 400 like an unknown field),
// before the call gets an id, so nothing of it is stored.
func (inv *Invoker) checkCallback(req CallRequest) error {
	if req.CallbackURL == "" {
		return nil
	}
	msg := "callbacks are not delivered by this server"
	if inv.recording.callbacks != nil {
		msg = inv.recording.callbacks.Check(req.CallbackURL)
	}
	if msg == "" {
		return nil
	}
	return models.ErrInvalid.Errorf("%s", msg)
}

// newCallback is the delivery of a call accepted for later, nil when the
// call names no callback_url or was accepted before (a call resumed in
// the background already has one).
func (inv *Invoker) newCallback(c *call) *models.Callback {
	if c.req.CallbackURL == "" || c.life.tracked || inv.recording.callbacks == nil || inv.recording.callbacks.Check(c.req.CallbackURL) != "" {
		return nil
	}
	return &models.Callback{CallID: c.id, PrincipalID: principalID(c.caller), URL: c.req.CallbackURL,
		State: models.CallbackWaiting, CreatedAt: time.Now().UTC()}
}

// callEnded hands the result of a call that answered 202 to its delivery,
// if it has one.
func (inv *Invoker) callEnded(ctx context.Context, callID string, result []byte) {
	if inv.recording.callbacks != nil {
		inv.recording.callbacks.Due(context.WithoutCancel(ctx), callID, result)
	}
}

// Callbacks returns the deliveries of the calls among ids (those that
// named a callback_url and answered 202), by call id.
func (inv *Invoker) Callbacks(ctx context.Context, ids ...string) (map[string]*models.Callback, error) {
	return inv.store.CallbacksOf(ctx, ids)
}
