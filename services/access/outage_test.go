package access

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/poll"
	"toolbelt/models"
)

// TestKeysOutlastAnOutageWithinTheGrace stops the Postgres server the
// accounts use (issue 39): a key checked before keeps working past the
// 10 s of the checked-key cache, for the outage grace and not a moment
// longer, the moment Outage.Refusing (what readiness reads) turns; a key
// revoked, or a principal disabled, before the outage is refused
// throughout — here, and when the revocation was made by another
// instance whose notice arrived.
func TestKeysOutlastAnOutageWithinTheGrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := dbtest.PostgresServer(t)
	store, err := models.OpenPostgres(ctx, pg.Database(t, "outage"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	accounts := func(outage *Outage) *Accounts {
		authz, err := OpenAuthz(ctx, AuthzDeps{Store: store})
		if err != nil {
			t.Fatal(err)
		}
		return NewAccounts(AccountsDeps{Store: store, Authz: authz, Log: quiet, Outage: outage})
	}
	const grace = 2 * time.Minute
	outage := NewOutage(grace)
	acc, other := accounts(outage), accounts(NewOutage(grace)) // other: another instance
	if _, err := acc.Bootstrap(ctx, ""); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	ids := map[string]uint{}
	for _, name := range []string{"kept", "revoked", "disabled", "revoked_elsewhere"} {
		p, err := acc.CreatePrincipal(ctx, NewPrincipal{Name: name, Role: RoleAgent}, nil)
		if err != nil {
			t.Fatal(err)
		}
		keys[name], ids[name] = p.Key, p.ID
		if _, _, err := acc.Authenticate(ctx, "test", p.Key); err != nil { // checked: verified here
			t.Fatal(err)
		}
	}
	keyIDs := map[string]uint{}
	all, err := acc.Principals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		if len(p.Keys) > 0 {
			keyIDs[p.Name] = p.Keys[0].ID
		}
	}
	if _, err := acc.RevokeKey(ctx, keyIDs["revoked"], nil); err != nil {
		t.Fatal(err)
	}
	if _, err := acc.SetDisabled(ctx, ids["disabled"], true, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := other.RevokeKey(ctx, keyIDs["revoked_elsewhere"], nil); err != nil {
		t.Fatal(err)
	}
	acc.ForgetKeys() // the other instance's notice
	for _, name := range []string{"kept", "disabled"} {
		_, _, _ = acc.Authenticate(ctx, "test", keys[name]) // used again since
	}

	pg.Stop()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = pg.Start() // for the server's own cleanup
		}
	})
	acc.known.Purge() // the checked-key cache's 10 s have passed
	start := time.Now()
	acc.now = func() time.Time { return start }
	refused := func(name string) {
		t.Helper()
		if p, _, err := acc.Authenticate(ctx, "test", keys[name]); err == nil {
			t.Errorf("%s: the key of %s was accepted during the outage", acc.now().Sub(start), p.Name)
		}
	}
	accepted := func() {
		t.Helper()
		p, _, err := acc.Authenticate(ctx, "test", keys["kept"])
		if err != nil || p.Name != "kept" {
			t.Fatalf("%s into the outage: the key checked before was refused: %v", acc.now().Sub(start), err)
		}
		if since, refusing := outage.Refusing(acc.now()); refusing || !since.Equal(start) {
			t.Errorf("%s into the outage: Refusing = %v, %v; want since %v, not refusing", acc.now().Sub(start), since, refusing, start)
		}
	}
	for _, at := range []time.Duration{0, 10 * time.Second, grace - time.Millisecond} {
		acc.now = func() time.Time { return start.Add(at) }
		accepted()
		refused("revoked")
		refused("disabled")
		refused("revoked_elsewhere")
	}

	// The grace over: refused, and readiness says so at the same moment.
	acc.now = func() time.Time { return start.Add(grace) }
	_, _, err = acc.Authenticate(ctx, "test", keys["kept"])
	if !models.Unavailable(err) {
		t.Errorf("past the grace: %v, want the database's unavailability", err)
	}
	if _, refusing := outage.Refusing(acc.now()); !refusing {
		t.Error("past the grace, Refusing says the instance serves")
	}

	// The database back: the key works, the outage is over.
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	poll.Until(t, 30*time.Second, "the database back, the key accepted", func() (bool, string) {
		_, _, err := acc.Authenticate(ctx, "test", keys["kept"])
		return err == nil, fmt.Sprint(err)
	})
	if since, refusing := outage.Refusing(acc.now()); refusing || !since.IsZero() {
		t.Errorf("the database back: Refusing = %v, %v", since, refusing)
	}
	if _, _, err := acc.Authenticate(ctx, "test", keys["revoked"]); !errors.Is(err, models.ErrUnauthorized) {
		t.Errorf("the revoked key once the database is back: %v", err)
	}
}
