package access

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"toolbelt/models"
	"toolbelt/models/modelstest"
)

var quiet = slog.New(slog.DiscardHandler)

// newAccounts is Accounts over a fresh database, and the database.
func newAccounts(t *testing.T) (*Accounts, *models.Store) {
	t.Helper()
	store, _ := modelstest.Store(t)
	authz, err := OpenAuthz(context.Background(), AuthzDeps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return NewAccounts(AccountsDeps{Store: store, Authz: authz, Log: quiet}), store
}

// TestBootstrap creates the admin once, takes an operator's key without
// returning it, and adds a newly configured key on a later start.
func TestBootstrap(t *testing.T) {
	ctx := context.Background()
	acc, store := newAccounts(t)

	first := "first-operator-key-0123456789"
	if got, err := acc.Bootstrap(ctx, first); err != nil || got != "" {
		t.Fatalf("Bootstrap with a configured key returned %q, %v", got, err)
	}
	p, _, err := acc.Authenticate(ctx, "test", first)
	if err != nil || p.Role != RoleAdmin || p.Name != "admin" {
		t.Fatalf("configured key: %v %v", p, err)
	}
	if got, err := acc.Bootstrap(ctx, ""); err != nil || got != "" {
		t.Fatalf("second start printed %q, %v", got, err)
	}
	second := "second-operator-key-0123456789"
	if _, err := acc.Bootstrap(ctx, second); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{first, second} {
		if _, _, err := acc.Authenticate(ctx, "test", k); err != nil {
			t.Errorf("key %s…: %v", k[:6], err)
		}
	}
	if n, _ := store.CountPrincipals(ctx); n != 1 {
		t.Errorf("%d principals, want the one admin", n)
	}
	// A revoked operator key stays revoked, and start-up still succeeds.
	p2, _ := store.PrincipalByName(ctx, "admin")
	if _, err := acc.IssueKey(ctx, p2.ID, KeyOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	keys, _ := store.Principals(ctx)
	if _, err := acc.RevokeKey(ctx, keys[0].Keys[0].ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := acc.Bootstrap(ctx, first); err != nil {
		t.Fatalf("start-up with a revoked TOOLBELT_ADMIN_KEY: %v", err)
	}
	if _, _, err := acc.Authenticate(ctx, "test", first); !errors.Is(err, models.ErrUnauthorized) {
		t.Errorf("revoked operator key accepted again: %v", err)
	}
	if _, err := acc.Bootstrap(ctx, "short"); !errors.Is(err, models.ErrInvalid) {
		t.Errorf("short key: %v", err)
	}
	for _, bad := range []string{"", "x", "tb_" + first, first + " "} {
		if _, _, err := acc.Authenticate(ctx, "test", bad); !errors.Is(err, models.ErrUnauthorized) {
			t.Errorf("Authenticate(%q) = %v, want ErrUnauthorized", bad, err)
		}
	}
}

// TestAuthzSeedReplacesEndpointPolicies checks that a restart with a new
// route table replaces the endpoint policies and keeps grants.
func TestAuthzSeedReplacesEndpointPolicies(t *testing.T) {
	ctx := context.Background()
	store, _ := modelstest.Store(t)
	v1 := map[string][]Route{RoleAgent: {{Method: "GET", Path: "/api/v1/tools"}, {Method: "POST", Path: "/api/v1/old"}}}
	a, err := OpenAuthz(ctx, AuthzDeps{Store: store, Roles: v1})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetGrants(7, Grants{Categories: []string{"search"}, Tools: []string{"file_read"}}); err != nil {
		t.Fatal(err)
	}
	v2 := map[string][]Route{RoleAgent: {{Method: "GET", Path: "/api/v1/tools"}}, RoleAdmin: {{Method: "*", Path: "/api/v1/*"}}}
	a, err = OpenAuthz(ctx, AuthzDeps{Store: store, Roles: v2})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		role, path, method string
		want               bool
	}{
		{RoleAgent, "/api/v1/tools", "GET", true},
		{RoleAgent, "/api/v1/old", "POST", false},
		{RoleAgent, "/api/v1/tools", "POST", false},
		{RoleAdmin, "/api/v1/principals/:id/keys", "POST", true},
		{RoleReviewer, "/api/v1/tools", "GET", false},
	} {
		if got, err := a.CanAccess(tc.role, tc.path, tc.method); err != nil || got != tc.want {
			t.Errorf("CanAccess(%s, %s %s) = %v, %v; want %v", tc.role, tc.method, tc.path, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		tool, category string
		want           bool
	}{
		{"web_search", "search", true},
		{"file_read", "filesystem", true},
		{"file_write", "filesystem", false},
	} {
		if got, _ := a.MayUse(7, tc.tool, tc.category); got != tc.want {
			t.Errorf("MayUse(%s) = %v, want %v", tc.tool, got, tc.want)
		}
	}
	if got, _ := a.MayUse(8, "web_search", "search"); got {
		t.Error("another principal inherited the grants")
	}
}
