package connect

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolbelt/internal/oauthupstream"
	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/netpolicy"
)

// noCredential fails t when p has a connection to server.
func noCredential(t *testing.T, store *models.Store, p *models.Principal, server string) {
	t.Helper()
	if _, err := store.CredentialOf(t.Context(), p.ID, models.CredentialOAuth, server); !errors.Is(err, models.ErrNotFound) {
		t.Fatalf("%s has a connection to %s: %v", p.Name, server, err)
	}
}

// TestStateAttacks: a state finished by another person or from another
// session is refused and stays usable by its owner; a state replayed
// after it was used, a code replayed with a new state and a response
// claiming another issuer are refused, writing nothing.
func TestStateAttacks(t *testing.T) {
	t.Parallel()
	store, _ := modelstest.Store(t)
	f := newFixture(t, store)
	up := oauthupstream.Start(t, oauthupstream.Options{})
	f.register(t, "tracker", up, nil)
	alice, bob := f.person(t, "alice"), f.person(t, "bob")

	fl := f.flow(t, alice, "alice-session", "tracker", up, "alice")
	if _, err := f.svc.Finish(t.Context(), bob, "bob-session", fl.state, fl.code, fl.iss); !errors.Is(err, models.ErrForbidden) {
		t.Fatalf("bob finished alice's flow: %v", err)
	}
	noCredential(t, store, bob, "tracker")
	if _, err := f.svc.Finish(t.Context(), alice, "stolen-elsewhere", fl.state, fl.code, fl.iss); !errors.Is(err, models.ErrForbidden) {
		t.Fatalf("alice's flow finished from another session: %v", err)
	}
	if _, err := f.svc.Finish(t.Context(), alice, "alice-session", fl.state, fl.code, "http://127.0.0.1:9/"); !errors.Is(err, models.ErrForbidden) {
		t.Fatalf("a response from another issuer: %v", err)
	}
	noCredential(t, store, alice, "tracker")

	// The mix-up attempt used the state: alice starts again, and her own
	// flow, untouched by bob's and the other session's tries, works.
	fl = f.flow(t, alice, "alice-session", "tracker", up, "alice")
	if _, err := f.svc.Finish(t.Context(), bob, "alice-session", fl.state, fl.code, fl.iss); !errors.Is(err, models.ErrForbidden) {
		t.Fatalf("bob with alice's session binding: %v", err)
	}
	if _, err := f.svc.Finish(t.Context(), alice, "alice-session", fl.state, fl.code, fl.iss); err != nil {
		t.Fatalf("alice's own flow after the attempts: %v", err)
	}
	before, _ := store.CredentialOf(t.Context(), alice.ID, models.CredentialOAuth, "tracker")

	if _, err := f.svc.Finish(t.Context(), alice, "alice-session", fl.state, fl.code, fl.iss); !errors.Is(err, models.ErrConflict) {
		t.Fatalf("a replayed state: %v", err)
	}
	next := f.flow(t, alice, "alice-session", "tracker", up, "alice")
	if _, err := f.svc.Finish(t.Context(), alice, "alice-session", next.state, fl.code, next.iss); !errors.Is(err, models.ErrForbidden) || !strings.Contains(err.Error(), "refused the code") {
		t.Fatalf("a replayed code: %v", err)
	}
	after, _ := store.CredentialOf(t.Context(), alice.ID, models.CredentialOAuth, "tracker")
	if after.Version != before.Version || string(after.Sealed) != string(before.Sealed) {
		t.Fatal("a refused replay changed alice's connection")
	}
	if _, err := f.svc.Finish(t.Context(), alice, "alice-session", "made-up-state", fl.code, fl.iss); !errors.Is(err, models.ErrNotFound) {
		t.Fatalf("an unknown state: %v", err)
	}
	if n := up.Count("token"); n != 1 {
		t.Fatalf("the upstream issued %d tokens, want alice's one", n)
	}
}

// TestTokenForAnotherResource: alice's token is bound to the upstream she
// connected to (RFC 8707); Toolbelt never hands it for another upstream,
// and the other upstream refuses it if it gets there.
func TestTokenForAnotherResource(t *testing.T) {
	t.Parallel()
	store, _ := modelstest.Store(t)
	f := newFixture(t, store)
	upA, upB := oauthupstream.Start(t, oauthupstream.Options{}), oauthupstream.Start(t, oauthupstream.Options{})
	a, b := f.register(t, "alpha", upA, nil), f.register(t, "beta", upB, nil)
	alice := f.person(t, "alice")
	f.connect(t, alice, "alpha", upA, "alice")

	tok, err := f.svc.Token(t.Context(), a, call(alice))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Token(t.Context(), b, call(alice)); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("alice has no connection to beta, yet: %v", err)
	}
	if got := whoami(t, upB.URL, tok); got != "401" {
		t.Fatalf("beta answered %q to alpha's token", got)
	}
	if log := upA.Log(); len(log) == 0 || log[len(log)-1].Resource != upA.URL {
		t.Fatalf("alpha's token was not bound to alpha: %+v", log)
	}
	if len(upB.Calls()) != 0 {
		t.Fatal("beta served a call with alpha's token")
	}
}

// catcher is a server on another origin that counts what reaches it.
func catcher(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"forged","token_type":"Bearer","expires_in":3600}`))
	}))
	t.Cleanup(s.Close)
	return s, &hits
}

// TestRedirectToAnotherOrigin: a token endpoint that redirects the code
// exchange elsewhere, and authorization server metadata that redirects
// elsewhere, are not followed: the code, the verifier and the client
// secret never reach the other origin, and nothing is stored.
func TestRedirectToAnotherOrigin(t *testing.T) {
	t.Parallel()
	store, _ := modelstest.Store(t)
	f := newFixture(t, store)
	elsewhere, hits := catcher(t)

	up := oauthupstream.Start(t, oauthupstream.Options{TokenRedirect: elsewhere.URL + "/token"})
	f.register(t, "tracker", up, nil)
	alice := f.person(t, "alice")
	fl := f.flow(t, alice, "s", "tracker", up, "alice")
	_, err := f.svc.Finish(t.Context(), alice, "s", fl.state, fl.code, fl.iss)
	if err == nil || !strings.Contains(err.Error(), "another origin") {
		t.Fatalf("a token endpoint redirecting elsewhere: %v", err)
	}
	noCredential(t, store, alice, "tracker")

	meta := oauthupstream.Start(t, oauthupstream.Options{MetadataRedirect: elsewhere.URL + "/.well-known/oauth-authorization-server"})
	u := &models.Upstream{Name: "meta", Transport: models.TransportHTTP, URL: meta.URL, Auth: &models.UpstreamAuth{Type: models.UpstreamAuthOAuth}}
	if err := f.svc.Discover(t.Context(), u); err == nil || !strings.Contains(err.Error(), "another origin") {
		t.Fatalf("metadata redirecting elsewhere: %v", err)
	}
	if hits.Load() != 0 {
		t.Fatalf("the other origin was reached %d times", hits.Load())
	}
}

// TestDiscoveryRefusals: what discovery refuses, each with what to do.
func TestDiscoveryRefusals(t *testing.T) {
	t.Parallel()
	store, _ := modelstest.Store(t)
	f := newFixture(t, store)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(plain.Close)
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) }))
	t.Cleanup(bare.Close)
	// A server whose resource metadata names an authorization server
	// that publishes no metadata.
	var noAS *httptest.Server
	noAS = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-protected-resource/mcp":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"resource":"` + noAS.URL + `/mcp","authorization_servers":["` + noAS.URL + `"]}`))
		case "/mcp":
			w.WriteHeader(http.StatusUnauthorized)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(noAS.Close)
	honest := oauthupstream.Start(t, oauthupstream.Options{})
	cases := []struct {
		name string
		url  func() string
		svc  *Service
		auth models.UpstreamAuth
		want string
	}{
		{"no 401", func() string { return plain.URL + "/mcp" }, f.svc, models.UpstreamAuth{Type: "oauth"}, "not 401 Unauthorized"},
		{"no metadata", func() string { return bare.URL + "/mcp" }, f.svc, models.UpstreamAuth{Type: "oauth"}, "no protected resource metadata"},
		{"no authorization server metadata", func() string { return noAS.URL + "/mcp" }, f.svc, models.UpstreamAuth{Type: "oauth"}, "publishes no metadata"},
		{"no S256", func() string { return oauthupstream.Start(t, oauthupstream.Options{NoS256: true}).URL }, f.svc, models.UpstreamAuth{Type: "oauth"}, "S256"},
		{"no way to register", func() string { return oauthupstream.Start(t, oauthupstream.Options{NoDCR: true, CIMD: true}).URL }, f.svc, models.UpstreamAuth{Type: "oauth"}, "TOOLBELT_PUBLIC_URL"},
		{"lying resource", func() string {
			return oauthupstream.Start(t, oauthupstream.Options{PRMResource: "https://mcp.example.com/mcp"}).URL
		}, f.svc, models.UpstreamAuth{Type: "oauth"}, "no protected resource metadata"},
		{"private metadata", func() string {
			return oauthupstream.Start(t, oauthupstream.Options{ResourceMetadata: "http://10.0.0.1/.well-known/oauth-protected-resource/mcp"}).URL
		}, f.svc, models.UpstreamAuth{Type: "oauth"}, "10.0.0.1/.well-known/oauth-protected-resource/mcp: refused by the outbound-address policy"},
		{"loopback not allowed", func() string { return honest.URL }, f.service(netpolicy.Policy{}), models.UpstreamAuth{Type: "oauth"}, "outbound-address policy"},
		{"exchange without oidc", func() string { return honest.URL }, f.svc, models.UpstreamAuth{Type: "exchange", Audience: "x"}, "TOOLBELT_OAUTH=oidc"},
		{"secret not configured", func() string { return honest.URL }, f.svc, models.UpstreamAuth{Type: "oauth", ClientID: "c", ClientSecret: "{{env.MISSING}}"}, "TOOLBELT_SECRETS"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			auth := c.auth
			u := &models.Upstream{Name: "x", Transport: models.TransportHTTP, URL: c.url(), Auth: &auth}
			err := c.svc.Discover(t.Context(), u)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
			if u.Auth.ClientID != c.auth.ClientID || len(u.AuthSecret) != 0 {
				t.Fatalf("a refused discovery registered a client: %+v", u.Auth)
			}
		})
	}
}

// TestStaticAndMetadataClients: an admin-given client (its secret a
// configured one) is used as is; an https public URL and an
// authorization server that takes client ID metadata documents make the
// document's URL the client id. Alice connects with the static one.
func TestStaticAndMetadataClients(t *testing.T) {
	t.Parallel()
	store, _ := modelstest.Store(t)
	f := newFixture(t, store)
	up := oauthupstream.Start(t, oauthupstream.Options{NoDCR: true, ClientID: "toolbelt-static", ClientSecret: "s3cret-of-the-static-client",
		RedirectURIs: []string{publicURL + CallbackPath}})
	u := f.register(t, "tracker", up, &models.UpstreamAuth{Type: models.UpstreamAuthOAuth, ClientID: "toolbelt-static", ClientSecret: "{{env.UP_SECRET}}"})
	if u.Auth.Registration != models.RegistrationStatic || len(u.AuthSecret) != 0 {
		t.Fatalf("static client: %+v", u.Auth)
	}
	alice := f.person(t, "alice")
	f.connect(t, alice, "tracker", up, "alice")
	if tok, err := f.svc.Token(t.Context(), u, call(alice)); err != nil || whoami(t, up.URL, tok) != "alice" {
		t.Fatalf("alice through the static client: %v", err)
	}

	cimd := oauthupstream.Start(t, oauthupstream.Options{NoDCR: true, CIMD: true})
	https := New(Deps{Store: store, Vault: f.vault, Net: loopback, PublicURL: "https://toolbelt.example.com"})
	m := &models.Upstream{Name: "docs", Transport: models.TransportHTTP, URL: cimd.URL, Auth: &models.UpstreamAuth{Type: models.UpstreamAuthOAuth}}
	if err := https.Discover(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	if m.Auth.Registration != models.RegistrationMetadata || m.Auth.ClientID != "https://toolbelt.example.com"+ClientDocumentPath {
		t.Fatalf("metadata client: %+v", m.Auth)
	}
}

// TestExpiredState: a flow not finished within ten minutes is refused,
// saying so, and exchanges nothing.
func TestExpiredState(t *testing.T) {
	t.Parallel()
	f, up, _, alice := aliceConnected(t)
	fl := f.flow(t, alice, "s", "tracker", up, "alice")
	// Ten minutes pass.
	res := f.store.DB().Model(&models.ConnectState{}).Where("state_hash = ?", hash(fl.state)).Update("expires_at", time.Now().Add(-time.Second))
	if res.Error != nil || res.RowsAffected != 1 {
		t.Fatal(res.Error)
	}
	if _, err := f.svc.Finish(t.Context(), alice, "s", fl.state, fl.code, fl.iss); !errors.Is(err, models.ErrNotFound) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("an expired state: %v", err)
	}
	if n := up.Count("token"); n != 1 {
		t.Fatalf("%d codes exchanged, want only the fixture's", n)
	}
}
