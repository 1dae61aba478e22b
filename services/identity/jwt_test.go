package identity

import (
	"errors"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolbelt/internal/testidp"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/netpolicy"
)

// The resources of a Toolbelt at a made-up public URL: the verifier only
// compares them with aud.
const (
	mcpResource = "https://toolbelt.example.test/mcp"
	apiResource = "https://toolbelt.example.test/api/v1"
)

// loopback is the outbound policy that lets Toolbelt reach the test
// provider: configuration (TOOLBELT_OIDC_ALLOW_PRIVATE), not a bypass.
var loopback = netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}

type jwtFixture struct {
	idp      *testidp.IDP
	verifier *JWTVerifier
	accounts *access.Accounts
	store    *models.Store
}

// newJWTFixture is a test provider with an agent, a reviewer and a person
// in no mapped group, a client whose tokens are for /mcp, and a verifier
// of its tokens over a fresh database.
func newJWTFixture(t *testing.T) *jwtFixture {
	t.Helper()
	idp := testidp.Start(t, testidp.Options{
		Users: []testidp.User{
			{Username: "ada", Password: "pw", Email: "ada@corp.example", Groups: []string{"tb-agents"}},
			{Username: "rex", Password: "pw", Groups: []string{"tb-reviewers"}},
			{Username: "eve", Password: "pw", Groups: []string{"staff"}},
		},
		Clients: []testidp.Client{
			{ID: "mcp-client", Resource: mcpResource},
			{ID: "api-client", Resource: apiResource},
			{ID: "entra-like", Resource: mcpResource, ScopesAsArray: true},
		},
	})
	people, acc, store := newPeople(t)
	v := NewJWTVerifier(JWTVerifierDeps{Issuer: idp.Issuer, People: people, Accounts: acc, Client: loopback.Client(), Log: quiet})
	return &jwtFixture{idp: idp, verifier: v, accounts: acc, store: store}
}

func TestJWTGoodToken(t *testing.T) {
	t.Parallel()
	f := newJWTFixture(t)
	tok := f.idp.AccessToken(t, "ada", "mcp-client", "openid", "tools:read", "tools:call", "approve", "admin")
	g, err := f.verifier.Verify(t.Context(), tok, mcpResource)
	if err != nil {
		t.Fatal(err)
	}
	if g.Principal.Name != "ada" || g.Principal.Role != access.RoleAgent {
		t.Errorf("principal %q role %s", g.Principal.Name, g.Principal.Role)
	}
	if !slices.Equal(g.Scopes, []string{access.ScopeRead, access.ScopeCall}) {
		t.Errorf("scopes %v: an agent's token holds at most tools:read tools:call", g.Scopes)
	}
	if g.Issuer != f.idp.Issuer || g.Subject != "sub-ada" || g.ClientID != "mcp-client" || g.TokenID == "" || time.Until(g.Expires) < time.Minute {
		t.Errorf("grant %+v", g)
	}
	// A trailing slash on the resource is the same resource.
	if _, err := f.verifier.Verify(t.Context(), tok, mcpResource+"/"); err != nil {
		t.Errorf("resource with a trailing slash: %v", err)
	}
	// Verified again (from the cache): the same grant, not shared.
	g2, err := f.verifier.Verify(t.Context(), tok, mcpResource)
	if err != nil || g2.Principal.ID != g.Principal.ID || &g2.Scopes[0] == &g.Scopes[0] {
		t.Errorf("second verify: %+v, %v", g2, err)
	}
}

func TestJWTScopesAsArrayAndFewerScopes(t *testing.T) {
	t.Parallel()
	f := newJWTFixture(t)
	g, err := f.verifier.Verify(t.Context(), f.idp.AccessToken(t, "rex", "entra-like", "openid", "tools:read", "tools:call"), mcpResource)
	if err != nil {
		t.Fatal(err)
	}
	if g.Principal.Role != access.RoleReviewer || !slices.Equal(g.Scopes, []string{access.ScopeRead}) {
		t.Errorf("reviewer asking read+call got role %s scopes %v, want read only", g.Principal.Role, g.Scopes)
	}
}

// TestJWTAttacks makes the tokens an attacker would try; each is refused
// as unauthorized and creates no principal.
func TestJWTAttacks(t *testing.T) {
	t.Parallel()
	f := newJWTFixture(t)
	ctx := t.Context()
	good := f.idp.Claims("ada", mcpResource, 5*time.Minute, "tools:read")
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for k, v := range good {
			c[k] = v
		}
		c[k] = v
		return c
	}
	// The baseline, signed by the provider's key, passes: each attack
	// below differs from it in one way.
	if _, err := f.verifier.Verify(ctx, f.idp.Sign(t, good), mcpResource); err != nil {
		t.Fatalf("baseline: %v", err)
	}
	for _, c := range []struct {
		name, token, resource, says string
	}{
		{"another resource's token (real flow)", f.idp.AccessToken(t, "ada", "api-client", "tools:read"), mcpResource, "not " + mcpResource},
		{"aud another resource", f.idp.Sign(t, with("aud", []string{"https://evil.example.test/mcp"})), mcpResource, "not " + mcpResource},
		{"aud another path", f.idp.Sign(t, with("aud", []string{"https://toolbelt.example.test/admin"})), mcpResource, "not"},
		{"aud another scheme", f.idp.Sign(t, with("aud", []string{"http://toolbelt.example.test/mcp"})), mcpResource, "not"},
		{"aud another port", f.idp.Sign(t, with("aud", []string{"https://toolbelt.example.test:8443"})), mcpResource, "not"},
		{"/mcp token at /api/v1", f.idp.Sign(t, good), apiResource, "not " + apiResource},
		{"no aud", f.idp.Sign(t, with("aud", []string{})), mcpResource, "not"},
		{"expired", f.idp.Sign(t, with("exp", time.Now().Add(-2*time.Minute).Unix())), mcpResource, "expired"},
		{"alg none", testidp.ForgeNone(t, good), mcpResource, "not a valid token"},
		{"other key, provider's kid", f.idp.ForgeWithKey(t, good, ""), mcpResource, "not a valid token"},
		{"other key, unknown kid", f.idp.ForgeWithKey(t, good, "attacker-kid"), mcpResource, "not a valid token"},
		{"tampered payload", tamper(t, f.idp.Sign(t, good), f.idp.Sign(t, with("sub", "sub-rex"))), mcpResource, "not a valid token"},
		{"no subject", f.idp.Sign(t, with("sub", "")), mcpResource, "no subject"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.verifier.Verify(ctx, c.token, c.resource)
			if !errors.Is(err, models.ErrUnauthorized) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("Verify = %v, want ErrUnauthorized saying %q", err, c.says)
			}
		})
	}
	if n := count(t, f.store); n != 2 {
		t.Errorf("%d principals, want the admin and ada (from the baseline)", n)
	}
	// A token of the same issuer for another resource makes no principal.
	if _, err := f.verifier.Verify(ctx, f.idp.AccessToken(t, "rex", "api-client", "tools:read"), mcpResource); !errors.Is(err, models.ErrUnauthorized) {
		t.Errorf("rex's /api/v1 token at /mcp: %v", err)
	}
	if n := count(t, f.store); n != 2 {
		t.Errorf("%d principals: a token for another resource made one", n)
	}
}

// tamper puts the payload of other on the header and signature of signed.
func tamper(t *testing.T, signed, other string) string {
	t.Helper()
	a, b := strings.Split(signed, "."), strings.Split(other, ".")
	return a[0] + "." + b[1] + "." + a[2]
}

func TestJWTNotMine(t *testing.T) {
	t.Parallel()
	f := newJWTFixture(t)
	other := testidp.Start(t, testidp.Options{
		Users:   []testidp.User{{Username: "ada", Password: "pw", Groups: []string{"tb-agents"}}},
		Clients: []testidp.Client{{ID: "mcp-client", Resource: mcpResource}},
	})
	for name, tok := range map[string]string{
		"another issuer":               other.AccessToken(t, "ada", "mcp-client", "tools:read"),
		"issuer with a trailing slash": f.idp.Sign(t, withIssuer(f.idp.Claims("ada", mcpResource, time.Minute), f.idp.Issuer+"/")),
		"api key":                      "tb_0123456789abcdef0123456789abcdef",
		"opaque token":                 "c29tZSBvcGFxdWUgdG9rZW4",
		"not JSON":                     "a.b.c",
	} {
		if _, err := f.verifier.Verify(t.Context(), tok, mcpResource); !errors.Is(err, access.ErrNotMine) {
			t.Errorf("%s: %v, want ErrNotMine", name, err)
		}
	}
}

func withIssuer(c map[string]any, iss string) map[string]any {
	c["iss"] = iss
	return c
}

// TestJWTNoMappedGroup refuses a person in none of the mapped groups as
// forbidden, and creates no principal.
func TestJWTNoMappedGroup(t *testing.T) {
	t.Parallel()
	f := newJWTFixture(t)
	_, err := f.verifier.Verify(t.Context(), f.idp.AccessToken(t, "eve", "mcp-client", "tools:read"), mcpResource)
	if !errors.Is(err, models.ErrForbidden) {
		t.Errorf("Verify = %v, want ErrForbidden", err)
	}
	if n := count(t, f.store); n != 1 {
		t.Errorf("%d principals, want only the admin", n)
	}
}

// TestJWTDisabledAtOnce refuses a disabled principal's token at once,
// though it was verified (and cached) a moment before, and again once
// the principal is enabled.
func TestJWTDisabledAtOnce(t *testing.T) {
	t.Parallel()
	f := newJWTFixture(t)
	ctx := t.Context()
	tok := f.idp.AccessToken(t, "ada", "mcp-client", "tools:read")
	g, err := f.verifier.Verify(ctx, tok, mcpResource)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.accounts.SetDisabled(ctx, g.Principal.ID, true, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.verifier.Verify(ctx, tok, mcpResource); !errors.Is(err, models.ErrUnauthorized) || !strings.Contains(err.Error(), "disabled") {
		t.Errorf("disabled principal's cached token: %v, want ErrUnauthorized saying disabled", err)
	}
	if _, err := f.accounts.SetDisabled(ctx, g.Principal.ID, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.verifier.Verify(ctx, tok, mcpResource); err != nil {
		t.Errorf("enabled again: %v", err)
	}
}

// TestJWTRoleFollowsGroups gives a token issued after the person's groups
// changed the new role's scopes.
func TestJWTRoleFollowsGroups(t *testing.T) {
	t.Parallel()
	f := newJWTFixture(t)
	ctx := t.Context()
	if _, err := f.verifier.Verify(ctx, f.idp.AccessToken(t, "ada", "mcp-client", "tools:read", "tools:call", "approve"), mcpResource); err != nil {
		t.Fatal(err)
	}
	f.idp.SetGroups("sub-ada", "tb-reviewers")
	g, err := f.verifier.Verify(ctx, f.idp.AccessToken(t, "ada", "mcp-client", "tools:read", "tools:call", "approve"), mcpResource)
	if err != nil || g.Principal.Role != access.RoleReviewer || !slices.Equal(g.Scopes, []string{access.ScopeRead, access.ScopeApprove}) {
		t.Errorf("after the groups changed: %+v, %v", g, err)
	}
}

// TestJWTPolicyRefusesLoopbackIssuer shows the issuer is reached through
// the outbound policy: without its address allowed, nothing is verified.
func TestJWTPolicyRefusesLoopbackIssuer(t *testing.T) {
	t.Parallel()
	f := newJWTFixture(t)
	people, acc, _ := newPeople(t)
	strict := NewJWTVerifier(JWTVerifierDeps{Issuer: f.idp.Issuer, People: people, Accounts: acc, Client: netpolicy.Policy{}.Client(), Log: quiet})
	_, err := strict.Verify(t.Context(), f.idp.AccessToken(t, "ada", "mcp-client", "tools:read"), mcpResource)
	if err == nil || !strings.Contains(err.Error(), netpolicy.ErrAddressRefused.Error()) {
		t.Errorf("Verify through the default policy = %v, want the address refused", err)
	}
}

// counting counts the requests to the provider's JWKS.
type counting struct {
	next http.RoundTripper
	keys *atomic.Int64
}

func (c counting) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/keys") {
		c.keys.Add(1)
	}
	return c.next.RoundTrip(r)
}

// TestJWTForgedTokensDoNotHammerTheProvider sends a burst of tokens that
// the cached keys do not verify (each would make go-oidc fetch the JWKS
// again): the provider is asked for its keys once.
func TestJWTForgedTokensDoNotHammerTheProvider(t *testing.T) {
	t.Parallel()
	f := newJWTFixture(t)
	people, acc, _ := newPeople(t)
	var keys atomic.Int64
	v := NewJWTVerifier(JWTVerifierDeps{Issuer: f.idp.Issuer, People: people, Accounts: acc, Log: quiet,
		Client: &http.Client{Transport: counting{next: loopback.Client().Transport, keys: &keys}}})
	claims := f.idp.Claims("ada", mcpResource, time.Minute, "tools:read")
	var forged []string
	for i := range 10 {
		forged = append(forged, f.idp.ForgeWithKey(t, claims, "kid-"+strconv.Itoa(i)))
	}
	if _, err := v.Verify(t.Context(), f.idp.AccessToken(t, "ada", "mcp-client", "tools:read"), mcpResource); err != nil {
		t.Fatal(err)
	}
	// The burst comes within the refetch floor, however slow the machine.
	frozen := time.Now()
	v.client.Transport.(*throttled).now = func() time.Time { return frozen }
	for i, tok := range forged {
		if _, err := v.Verify(t.Context(), tok, mcpResource); !errors.Is(err, models.ErrUnauthorized) {
			t.Fatalf("forged token %d: %v", i, err)
		}
	}
	if n := keys.Load(); n != 1 {
		t.Errorf("the JWKS was fetched %d times, want once", n)
	}
}
