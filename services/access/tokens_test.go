package access

import (
	"context"
	"errors"
	"slices"
	"testing"

	"toolbelt/models"
	"toolbelt/models/modelstest"
)

// TestCanAccessScoped checks that a token's scopes narrow what its role
// allows and never widen it: an agent's token with admin in its scopes
// is still refused the admin routes.
func TestCanAccessScoped(t *testing.T) {
	store, _ := modelstest.Store(t)
	roles := map[string][]Route{
		RoleAdmin: {{Method: "*", Path: "/api/v1/*"}},
		RoleAgent: {{Method: "GET", Path: "/api/v1/tools"}, {Method: "POST", Path: "/api/v1/calls"}},
	}
	scopes := map[string][]Route{
		ScopeRead:  {{Method: "GET", Path: "/api/v1/tools"}},
		ScopeCall:  {{Method: "POST", Path: "/api/v1/calls"}},
		ScopeAdmin: {{Method: "POST", Path: "/api/v1/principals"}},
	}
	a, err := OpenAuthz(context.Background(), AuthzDeps{Store: store, Roles: roles, Scopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		role   string
		scopes []string
		method string
		path   string
		want   bool
	}{
		{RoleAgent, []string{ScopeRead, ScopeCall}, "POST", "/api/v1/calls", true},
		{RoleAgent, []string{ScopeRead}, "POST", "/api/v1/calls", false},
		{RoleAgent, []string{ScopeRead}, "GET", "/api/v1/tools", true},
		{RoleAgent, nil, "GET", "/api/v1/tools", false},
		// The scope opens the route; the role does not: refused.
		{RoleAgent, []string{ScopeAdmin}, "POST", "/api/v1/principals", false},
		{RoleAdmin, []string{ScopeRead}, "POST", "/api/v1/principals", false},
		{RoleAdmin, []string{ScopeAdmin}, "POST", "/api/v1/principals", true},
		// A scope name that is a role's subject opens nothing.
		{RoleAgent, []string{"role:admin", "*"}, "GET", "/api/v1/tools", false},
	} {
		if got, err := a.CanAccessScoped(tc.role, tc.scopes, tc.path, tc.method); err != nil || got != tc.want {
			t.Errorf("CanAccessScoped(%s, %v, %s %s) = %v, %v; want %v", tc.role, tc.scopes, tc.method, tc.path, got, err, tc.want)
		}
	}
}

// TestGrantableScopes checks that a token never carries a scope its
// principal's role cannot hold, whatever the client asks.
func TestGrantableScopes(t *testing.T) {
	asked := []string{ScopeAdmin, ScopeCall, "openid", ScopeRead, ScopeApprove}
	for role, want := range map[string][]string{
		RoleAdmin:    {ScopeRead, ScopeCall, ScopeApprove, ScopeAdmin},
		RoleReviewer: {ScopeRead, ScopeApprove},
		RoleAgent:    {ScopeRead, ScopeCall},
		"intruder":   nil,
	} {
		if got := GrantableScopes(role, asked); !slices.Equal(got, want) {
			t.Errorf("GrantableScopes(%s) = %v; want %v", role, got, want)
		}
	}
	if got := GrantableScopes(RoleAgent, []string{ScopeApprove}); got != nil {
		t.Errorf("an agent asking approve got %v", got)
	}
}

// TestAudienceFits checks RFC 8707 audiences: the resource itself or the
// whole server, nothing else (another path, host, port or scheme).
func TestAudienceFits(t *testing.T) {
	const mcp = "https://tb.example.com/mcp"
	for _, tc := range []struct {
		aud  []string
		want bool
	}{
		{[]string{mcp}, true},
		{[]string{mcp + "/"}, true},
		{[]string{"https://tb.example.com"}, true},
		{[]string{"other", "https://tb.example.com/"}, true},
		{[]string{"https://tb.example.com/api/v1"}, false},
		{[]string{"https://tb.example.com.evil.io/mcp"}, false},
		{[]string{"https://tb.example.com:8443/mcp"}, false},
		{[]string{"http://tb.example.com/mcp"}, false},
		{[]string{"https://tb.example.com/mcpx"}, false},
		{nil, false},
	} {
		if got := AudienceFits(tc.aud, mcp); got != tc.want {
			t.Errorf("AudienceFits(%q) = %v; want %v", tc.aud, got, tc.want)
		}
	}
}

// verifierFunc is a TokenVerifier from a function.
type verifierFunc func(token string) (*Grant, error)

func (f verifierFunc) Verify(_ context.Context, token, _ string) (*Grant, error) { return f(token) }

// TestVerifyTokenOrder checks that verifiers are asked in order, that one
// that refuses a token of its kind ends the search, and that a token no
// verifier knows comes back ErrNotMine (it may be a key).
func TestVerifyTokenOrder(t *testing.T) {
	p := &models.Principal{ID: 3, Name: "ana", Role: RoleAgent}
	prefixed := func(prefix string, g *Grant) TokenVerifier {
		return verifierFunc(func(token string) (*Grant, error) {
			if len(token) < len(prefix) || token[:len(prefix)] != prefix {
				return nil, ErrNotMine
			}
			if token == prefix+"bad" {
				return nil, models.ErrUnauthorized.Errorf("expired")
			}
			return g, nil
		})
	}
	vs := []TokenVerifier{prefixed("a_", &Grant{Principal: p, ClientID: "first"}), prefixed("b_", &Grant{Principal: p, ClientID: "second"})}
	ctx := context.Background()
	if g, err := VerifyToken(ctx, vs, "b_ok", "r"); err != nil || g.ClientID != "second" {
		t.Errorf("b_ok: %v, %v", g, err)
	}
	if _, err := VerifyToken(ctx, vs, "a_bad", "r"); !errors.Is(err, models.ErrUnauthorized) {
		t.Errorf("a_bad: %v; want unauthorized", err)
	}
	if _, err := VerifyToken(ctx, vs, "c_x", "r"); !errors.Is(err, ErrNotMine) {
		t.Errorf("c_x: %v; want ErrNotMine", err)
	}
	if _, err := VerifyToken(ctx, nil, "c_x", "r"); !errors.Is(err, ErrNotMine) {
		t.Errorf("no verifiers: %v; want ErrNotMine", err)
	}
}
