package invoke

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"toolbelt/internal/poll"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/catalog"
	"toolbelt/services/embed"
	"toolbelt/services/redact"
	"toolbelt/services/runners"
	"toolbelt/services/tooldef"
)

// TestApprovedCallOutlastsADatabaseBlip: an approved call whose approval
// cannot be read or spent because the database does not answer (a
// restart) is not refused as "not matching": it waits for the database
// and runs, once. The blips are injected into the store's own queries:
// reading the approval fails twice, then spending it fails once after
// the update committed (the answer lost on its way back).
func TestApprovedCallOutlastsADatabaseBlip(t *testing.T) {
	ctx := context.Background()
	store, authz := catalogFixture(t)
	def := tooldef.Definition{
		Name: "guarded_echo", Version: "1.0.0", Description: "Answer the arguments, once a reviewer agrees.", Category: "code",
		Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`),
		Security:   tooldef.Security{Level: tooldef.LevelSafe, RequireConfirm: true},
		Runner:     tooldef.Runner{Kind: tooldef.RunnerBuiltin, Builtin: "echo"},
	}
	if _, err := catalog.NewRegistry(store, quiet).Register(ctx, def, nil); err != nil {
		t.Fatal(err)
	}
	agent := &models.Principal{Name: "agent", Role: access.RoleAgent}
	if err := store.CreatePrincipal(ctx, agent, &models.APIKey{Prefix: "a", Hash: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := authz.SetGrants(agent.ID, access.Grants{Tools: []string{def.Name}}); err != nil {
		t.Fatal(err)
	}
	red, err := redact.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	sel := newFixtureSelector(t, store, authz, embed.NewBuiltin(), 0)
	inv := New(Deps{Store: store, Selector: sel, Authz: authz, Redactor: red, Runners: runners.NewTable(runners.Deps{DataDir: t.TempDir(), Log: quiet}), DataDir: t.TempDir(), Log: quiet})
	t.Cleanup(func() { inv.Close(ctx) })

	parked := inv.Call(ctx, agent, CallRequest{Tool: def.Name, Arguments: json.RawMessage(`{"n":7}`), SessionID: "s"})
	if parked.Status != models.StatusAwaitingApproval {
		t.Fatalf("the call was not parked: %+v", parked)
	}
	var ids map[string]string
	if err := json.Unmarshal(parked.Data, &ids); err != nil {
		t.Fatal(err)
	}
	if _, err := store.DecideApproval(ctx, ids["approval_id"], models.ApprovalApproved, "ok", agent.ID+1, func(*models.Approval) error { return nil }); err != nil {
		t.Fatal(err)
	}

	var readFails, spendFails, reads, spends atomic.Int32
	readFails.Store(2)
	spendFails.Store(1)
	onApprovals := func(db *gorm.DB) bool { return db.Statement.Table == "approvals" }
	cb := store.DB().Callback()
	if err := cb.Query().Before("gorm:query").Register("test:approval_read_blip", func(db *gorm.DB) {
		if onApprovals(db) {
			reads.Add(1)
			if readFails.Add(-1) >= 0 {
				_ = db.AddError(driver.ErrBadConn)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := cb.Update().After("gorm:update").Register("test:approval_spend_blip", func(db *gorm.DB) {
		if onApprovals(db) && db.Error == nil {
			spends.Add(1)
			if spendFails.Add(-1) >= 0 {
				_ = db.AddError(driver.ErrBadConn)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}

	inv.runLater(parked.CallID, ids["approval_id"])
	var rec *models.Call
	poll.Until(t, 30*time.Second, "the approved call ended", func() (bool, string) {
		rec, err = store.CallByID(ctx, parked.CallID)
		return err == nil && rec.Status != models.StatusQueued && rec.Status != models.StatusRunning, fmt.Sprintf("%+v %v", rec, err)
	})
	if rec.Status != models.StatusSucceeded {
		t.Fatalf("the approved call ended %s %s: %s", rec.Status, rec.ErrorCode, rec.Result)
	}
	if n := reads.Load(); n < 3 {
		t.Errorf("the approval was read %d times; the blips were not met", n)
	}
	if n := spends.Load(); n < 2 {
		t.Errorf("the approval was spent %d times; the lost answer was not met", n)
	}
	a, err := store.ApprovalByID(ctx, ids["approval_id"])
	if err != nil || a.Status != models.ApprovalUsed {
		t.Errorf("the approval after the run: %+v %v", a, err)
	}
}
