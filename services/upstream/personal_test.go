package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/oauth2"

	"toolbelt/internal/oauthupstream"
	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/catalog"
	"toolbelt/services/runners"
)

// newFixtureOn is a manager over store with d (its store, registry,
// loopback policy and log filled in).
func newFixtureOn(t *testing.T, store *models.Store, d Deps) *fixture {
	t.Helper()
	d.Store, d.Registry, d.Net, d.Log = store, catalog.NewRegistry(store, quiet), loopback, quiet
	m := New(d)
	t.Cleanup(m.Close)
	return &fixture{store, d.Registry, m}
}

// errNoAccount stands for connect.ErrNotConnected.
var errNoAccount = errors.New("no account connected")

// accounts is the credentials service of these tests: each principal's
// token as an upstream issued it, and how often one was asked for.
type accounts struct {
	mu     sync.Mutex
	tokens map[uint]string
	asked  atomic.Int64
}

func (a *accounts) Token(_ context.Context, u *models.Upstream, c *runners.Call) (string, error) {
	a.asked.Add(1)
	a.mu.Lock()
	defer a.mu.Unlock()
	if tok, ok := a.tokens[c.Principal.ID]; ok {
		return tok, nil
	}
	return "", fmt.Errorf("%s at %s: %w", c.Principal.Name, u.Name, errNoAccount)
}

func (a *accounts) set(p *models.Principal, tok string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if tok == "" {
		delete(a.tokens, p.ID)
	} else {
		a.tokens[p.ID] = tok
	}
}

// signIn gets user's access token at s as a client would (dynamic
// registration, authorization code with PKCE and the resource).
func signIn(t *testing.T, s *oauthupstream.Server, user string) string {
	t.Helper()
	const redirect = "http://127.0.0.1:1/callback"
	res, err := http.Post(s.Origin()+"/register", "application/json", strings.NewReader(`{"redirect_uris":["`+redirect+`"],"client_name":"test"}`))
	if err != nil {
		t.Fatal(err)
	}
	var reg struct{ ClientID, ClientSecret string }
	err = json.NewDecoder(res.Body).Decode(&struct {
		ClientID     *string `json:"client_id"`
		ClientSecret *string `json:"client_secret"`
	}{&reg.ClientID, &reg.ClientSecret})
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	cfg := &oauth2.Config{ClientID: reg.ClientID, ClientSecret: reg.ClientSecret, RedirectURL: redirect,
		Endpoint: oauth2.Endpoint{AuthURL: s.Origin() + "/authorize", TokenURL: s.Origin() + "/token", AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	resource := oauth2.SetAuthURLParam("resource", s.URL)
	back, err := s.SignIn(cfg.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier), resource), user)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cfg.Exchange(t.Context(), back.Query().Get("code"), oauth2.VerifierOption(verifier), resource)
	if err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}

// person stores a principal of role.
func person(t *testing.T, store *models.Store, name, role string) *models.Principal {
	t.Helper()
	p := &models.Principal{Name: name, Role: role}
	if err := store.CreatePrincipal(t.Context(), p, &models.APIKey{Prefix: "tb_" + name, Hash: models.NewID()}); err != nil {
		t.Fatal(err)
	}
	return p
}

// oauthFixture is a manager over the real OAuth-protected upstream,
// registered as "people" by admin, whose tools are listed with admin's
// account.
type oauthFixture struct {
	*fixture
	up                *oauthupstream.Server
	acc               *accounts
	admin, alice, bob *models.Principal
}

func newOAuthFixture(t *testing.T) *oauthFixture {
	t.Helper()
	up := oauthupstream.Start(t, oauthupstream.Options{})
	store, _ := modelstest.Store(t)
	f := &oauthFixture{up: up, acc: &accounts{tokens: map[uint]string{}}}
	f.fixture = newFixtureOn(t, store, Deps{Credentials: f.acc, NotConnected: errNoAccount, PublicURL: "https://toolbelt.test"})
	f.admin, f.alice, f.bob = person(t, store, "admin", "admin"), person(t, store, "alice", "agent"), person(t, store, "bob", "agent")
	u := &models.Upstream{Name: "people", Transport: models.TransportHTTP, URL: up.URL, Category: "api", MaxConcurrent: 4, IdleSeconds: 300,
		Auth: &models.UpstreamAuth{Type: models.UpstreamAuthOAuth, Resource: up.URL}, CreatedBy: &f.admin.ID}
	if err := store.CreateUpstream(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	return f
}

// callAs runs tool as p through the mcp runner.
func (f *oauthFixture) callAs(t *testing.T, p *models.Principal, tool string) (string, error) {
	t.Helper()
	got, err := f.reg.Get(t.Context(), tool)
	if err != nil {
		t.Fatalf("tool %s: %v", tool, err)
	}
	data, err := f.m.Runner().Run(t.Context(), &runners.Call{ID: models.NewID(), Def: got.Definition, Args: map[string]any{}, Session: "s", Principal: p})
	if err != nil {
		return "", err
	}
	var out struct{ Content []struct{ Text string } }
	_ = json.Unmarshal([]byte(mustJSON(t, data)), &out)
	if len(out.Content) == 0 {
		t.Fatalf("%s answered %s", tool, mustJSON(t, data))
	}
	return out.Content[0].Text, nil
}

// wantNotConnected checks err is UPSTREAM_NOT_CONNECTED naming the
// console page that connects the server.
func wantNotConnected(t *testing.T, err error, url string) {
	t.Helper()
	var e *runners.Error
	if !errors.As(err, &e) || e.Code != models.CodeUpstreamNotConnected || e.ConnectURL != url || !strings.Contains(e.Message, url) {
		t.Fatalf("want UPSTREAM_NOT_CONNECTED with %s, got %#v", url, err)
	}
}

// TestEachPersonCallsAsThemself: a server with Auth is listed with the
// admin's account (not before it is connected), each person's call
// carries their own token (the upstream sees alice and bob), a person
// with none, or a call acting for nobody, is refused before anything is
// sent, and a person's disconnect stops their calls at once while the
// other's go on.
func TestEachPersonCallsAsThemself(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t)
	ctx := t.Context()
	const connectURL = "https://toolbelt.test/admin/connections?connect=people"

	// Not connected: no tools listed, no error loop, a clear state.
	_, err := f.m.Sync(ctx, "people", true, f.admin)
	wantNotConnected(t, err, connectURL)
	s, err := f.m.Server(ctx, "people")
	if err != nil || s.AuthType != "oauth" || !strings.Contains(s.Unlisted, connectURL) || s.Failing != "" || s.Connections != 0 {
		t.Fatalf("unlisted server: %+v %v", s, err)
	}

	f.acc.set(f.admin, signIn(t, f.up, "root"))
	// A sync with no admin asking (the server said its tools changed)
	// uses the account of the admin who registered it.
	if rep, err := f.m.Sync(ctx, "people", true, nil); err != nil || len(rep.Accepted) != 2 {
		t.Fatalf("sync with the creator's account: %+v %v", rep, err)
	}
	f.acc.set(f.alice, signIn(t, f.up, "alice"))
	f.acc.set(f.bob, signIn(t, f.up, "bob"))
	for _, p := range []*models.Principal{f.alice, f.bob, f.alice, f.bob} {
		if got, err := f.callAs(t, p, "people__whoami"); err != nil || got != p.Name {
			t.Fatalf("%s's whoami = %q, %v", p.Name, got, err)
		}
	}
	if w := f.m.Warm()["people"]; w != 3 { // admin's, alice's, bob's
		t.Errorf("%d connections, want one per person", w)
	}

	// Nobody connected: refused before any request.
	carol := person(t, f.store, "carol", "agent")
	before := len(f.up.Log())
	_, err = f.callAs(t, carol, "people__whoami")
	wantNotConnected(t, err, connectURL)
	_, err = f.callAs(t, nil, "people__whoami")
	wantNotConnected(t, err, connectURL)
	if after := f.up.Log(); len(after) != before {
		t.Fatalf("a refused call reached the upstream: %+v", after[before:])
	}

	// Alice disconnects: her next call is refused at once, bob's works.
	f.acc.set(f.alice, "")
	f.m.DropPerson("people", f.alice.ID)
	_, err = f.callAs(t, f.alice, "people__whoami")
	wantNotConnected(t, err, connectURL)
	if got, err := f.callAs(t, f.bob, "people__whoami"); err != nil || got != "bob" {
		t.Fatalf("bob after alice left: %q %v", got, err)
	}

	calls := map[string]int{}
	for _, c := range f.up.Calls() {
		calls[c.User]++
	}
	if len(calls) != 2 || calls["alice"] != 2 || calls["bob"] != 3 {
		t.Fatalf("the upstream saw %v, want alice twice and bob three times", calls)
	}
}

// TestRefusedTokenMidSession: a connection whose token the server
// refuses (revoked there; the row deleted on another instance, so this
// one never heard) answers the call as not connected and is dropped;
// the person connecting again works.
func TestRefusedTokenMidSession(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t)
	ctx := t.Context()
	f.acc.set(f.admin, signIn(t, f.up, "root"))
	if _, err := f.m.Sync(ctx, "people", true, f.admin); err != nil {
		t.Fatal(err)
	}
	f.acc.set(f.alice, signIn(t, f.up, "alice"))
	if got, err := f.callAs(t, f.alice, "people__whoami"); err != nil || got != "alice" {
		t.Fatalf("whoami: %q %v", got, err)
	}
	f.acc.set(f.alice, "not-a-token-the-server-issued")
	_, err := f.callAs(t, f.alice, "people__whoami")
	wantNotConnected(t, err, "https://toolbelt.test/admin/connections?connect=people")
	if w := f.m.Warm()["people"]; w != 1 { // the admin's only
		t.Fatalf("%d connections after a refused token", w)
	}
	// A refreshed token is read at each request: no reconnect needed.
	f.acc.set(f.alice, signIn(t, f.up, "alice"))
	if got, err := f.callAs(t, f.alice, "people__whoami"); err != nil || got != "alice" {
		t.Fatalf("whoami after connecting again: %q %v", got, err)
	}
	f.acc.set(f.alice, signIn(t, f.up, "alice2"))
	if got, err := f.callAs(t, f.alice, "people__whoami"); err != nil || got != "alice2" {
		t.Fatalf("whoami with a refreshed token: %q %v", got, err)
	}
}

// TestTokenNeverLeavesTheOrigin: a server with Auth that redirects to
// another origin is refused there; the other origin never sees the
// person's token.
func TestTokenNeverLeavesTheOrigin(t *testing.T) {
	t.Parallel()
	var leaked atomic.Value
	leaked.Store("")
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(elsewhere.Close)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirecting.Close)
	store, _ := modelstest.Store(t)
	acc := &accounts{tokens: map[uint]string{}}
	f := newFixtureOn(t, store, Deps{Credentials: acc, NotConnected: errNoAccount})
	alice := person(t, store, "alice", "agent")
	acc.set(alice, "alices-secret-token")
	u := &models.Upstream{Name: "moved", Transport: models.TransportHTTP, URL: redirecting.URL + "/mcp", Category: "api", MaxConcurrent: 1, IdleSeconds: 60,
		Auth: &models.UpstreamAuth{Type: models.UpstreamAuthOAuth}}
	if err := store.CreateUpstream(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	_, err := f.m.connect(t.Context(), u, nil, alice)
	var e *runners.Error
	if !errors.As(err, &e) || e.Code != models.CodeUpstream || !strings.Contains(e.Message, "another origin") {
		t.Fatalf("want the redirect refused, got %v", err)
	}
	if got := leaked.Load().(string); got != "" {
		t.Fatalf("the other origin got Authorization %q", got)
	}
}

// TestPersonalSecrets: {{user.secret.NAME}} in a server's headers is
// filled with the caller's own secret on a connection of their own; a
// person without it is refused, naming the secrets page.
func TestPersonalSecrets(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("X-Api-Key")] = true
		mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	store, _ := modelstest.Store(t)
	secrets := personalSecretsOf{}
	f := newFixtureOn(t, store, Deps{Personal: secrets, PublicURL: "https://toolbelt.test/"})
	alice, bob := person(t, store, "alice", "agent"), person(t, store, "bob", "agent")
	secrets[alice.ID] = map[string]string{"API_KEY": "alice-key"}
	u := &models.Upstream{Name: "keyed", Transport: models.TransportHTTP, URL: srv.URL, Category: "api", MaxConcurrent: 1, IdleSeconds: 60,
		Headers: map[string]string{"X-Api-Key": "{{user.secret.API_KEY}}"}}
	if err := store.CreateUpstream(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	_, _ = f.m.connect(t.Context(), u, nil, alice)
	_, err := f.m.connect(t.Context(), u, nil, bob)
	wantNotConnected(t, err, "https://toolbelt.test/admin/secrets?name=API_KEY")
	_, err = f.m.connect(t.Context(), u, nil, nil)
	wantNotConnected(t, err, "https://toolbelt.test/admin/secrets?name=API_KEY")
	mu.Lock()
	defer mu.Unlock()
	if !seen["alice-key"] || len(seen) != 1 {
		t.Fatalf("the server saw keys %v, want alice's only", seen)
	}
}

type personalSecretsOf map[uint]map[string]string

func (s personalSecretsOf) PersonalSecret(_ context.Context, principal uint, name string) (string, error) {
	if v, ok := s[principal][name]; ok {
		return v, nil
	}
	return "", models.ErrNotFound.Errorf("secret %s", name)
}

// TestUserSecretReferences: a registration's headers and environment may
// name a person's own secret, in upper case, and nothing else new.
func TestUserSecretReferences(t *testing.T) {
	t.Parallel()
	ok := Spec{Name: "keyed", Transport: models.TransportHTTP, URL: "https://mcp.example.com/mcp", Category: "api",
		Headers: map[string]string{"X-Api-Key": "{{user.secret.API_KEY}}"}}
	if err := ok.check(); err != nil {
		t.Fatalf("a person's own secret refused: %v", err)
	}
	if u := ok.upstream(); !personal(u) || !slices.Equal(personalSecrets(u), []string{"API_KEY"}) {
		t.Fatalf("personal %v, secrets %v", personal(u), personalSecrets(u))
	}
	for _, v := range []string{"{{user.secret.api_key}}", "{{user.API_KEY}}", "{{user.secret.}}"} {
		bad := ok
		bad.Headers = map[string]string{"X-Api-Key": v}
		if err := bad.check(); err == nil {
			t.Errorf("%s accepted", v)
		}
	}
}
