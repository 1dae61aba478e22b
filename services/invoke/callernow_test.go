package invoke

import (
	"context"
	"testing"

	"toolbelt/models"
	"toolbelt/models/modelstest"
)

// TestCallerNowCancelled: a background call cancelled between its claim
// and its tracking starts its chain with a context already cancelled, so
// reading its caller fails. That is the cancel the agent asked for, not a
// store failure: it ends CANCELLED, never INTERNAL (the cluster test saw
// a cancelled call end "failed: INTERNAL" when the cancel came then).
func TestCallerNowCancelled(t *testing.T) {
	store, _ := modelstest.Store(t)
	inv := &Invoker{store: store}
	p := &models.Principal{Name: "agent-1", Role: "agent"}
	if err := store.CreatePrincipal(context.Background(), p, &models.APIKey{Prefix: "a", Hash: "a"}); err != nil {
		t.Fatal(err)
	}
	if got, res := inv.callerNow(context.Background(), p.ID); res != nil || got.ID != p.ID {
		t.Fatalf("live context: %v %+v", got, res)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, res := inv.callerNow(ctx, p.ID)
	if res == nil || res.Error == nil || res.Error.Code != models.CodeCancelled {
		t.Fatalf("cancelled context: %+v", res)
	}
}
