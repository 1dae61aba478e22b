package connect

import (
	"bytes"
	"context"
	"log/slog"
	"net/netip"
	"testing"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/oauthupstream"
	"toolbelt/internal/testlog"
	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/netpolicy"
	"toolbelt/services/runners"
	"toolbelt/services/vault"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// loopback lets the service reach the test upstreams on 127.0.0.1, as an
// admin allows an internal range with TOOLBELT_ALLOW_PRIVATE.
var loopback = netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

// testKey is the vault key of every service of a test: instances of a
// cluster share theirs.
var testKey = bytes.Repeat([]byte{7}, 32)

// publicURL is Toolbelt's public URL in these tests: the redirect URI
// names it, and SignIn returns the redirect without following it.
const publicURL = "http://127.0.0.1:1"

type fixture struct {
	store *models.Store
	svc   *Service
	vault *vault.Vault
	log   *testlog.Buffer
}

func newFixture(t testing.TB, store *models.Store) *fixture {
	t.Helper()
	v, err := vault.New(testKey)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: store, vault: v, log: &testlog.Buffer{}}
	f.svc = f.service(loopback)
	return f
}

// service is another instance over the fixture's store, with policy.
func (f *fixture) service(policy netpolicy.Policy) *Service {
	return New(Deps{Store: f.store, Vault: f.vault, Net: policy, PublicURL: publicURL,
		Secrets: map[string]string{"UP_SECRET": "s3cret-of-the-static-client"},
		Log:     slog.New(slog.NewTextHandler(f.log, nil))})
}

// person stores a principal.
func (f *fixture) person(t testing.TB, name string) *models.Principal {
	t.Helper()
	p := &models.Principal{Name: name, Role: "agent"}
	if err := f.store.CreatePrincipal(t.Context(), p, &models.APIKey{Prefix: name, Hash: name}); err != nil {
		t.Fatal(err)
	}
	return p
}

// register discovers and stores an oauth upstream at up.
func (f *fixture) register(t testing.TB, name string, up *oauthupstream.Server, auth *models.UpstreamAuth) *models.Upstream {
	t.Helper()
	if auth == nil {
		auth = &models.UpstreamAuth{Type: models.UpstreamAuthOAuth}
	}
	u := &models.Upstream{Name: name, Transport: models.TransportHTTP, URL: up.URL, Auth: auth, Category: "api", Isolation: models.IsolationShared}
	if err := f.svc.Discover(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	if err := f.store.CreateUpstream(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	return u
}

// flow is a connect flow started by p in session bind, signed in at up
// as user: the callback's state, code and iss.
type flow struct{ state, code, iss string }

func (f *fixture) flow(t testing.TB, p *models.Principal, bind, server string, up *oauthupstream.Server, user string) flow {
	t.Helper()
	authURL, err := f.svc.Start(t.Context(), p, server, bind)
	if err != nil {
		t.Fatal(err)
	}
	back, err := up.SignIn(authURL, user)
	if err != nil {
		t.Fatal(err)
	}
	q := back.Query()
	return flow{q.Get("state"), q.Get("code"), q.Get("iss")}
}

// connect runs p's connect flow for server, signing in at up as user.
func (f *fixture) connect(t testing.TB, p *models.Principal, server string, up *oauthupstream.Server, user string) *models.Credential {
	t.Helper()
	bind := "session-of-" + p.Name
	fl := f.flow(t, p, bind, server, up, user)
	c, err := f.svc.Finish(t.Context(), p, bind, fl.state, fl.code, fl.iss)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// aliceConnected is a fixture on a new SQLite store with one upstream,
// "tracker", and alice connected to it.
func aliceConnected(t testing.TB) (*fixture, *oauthupstream.Server, *models.Upstream, *models.Principal) {
	t.Helper()
	store, _ := modelstest.Store(t)
	f := newFixture(t, store)
	up := oauthupstream.Start(t, oauthupstream.Options{})
	u := f.register(t, "tracker", up, nil)
	alice := f.person(t, "alice")
	f.connect(t, alice, "tracker", up, "alice")
	return f, up, u, alice
}

func call(p *models.Principal) *runners.Call { return &runners.Call{Principal: p} }

// whoami is who the upstream takes token for ("401": no one).
func whoami(t *testing.T, mcpURL, token string) string { return oauthupstream.Whoami(t, mcpURL, token) }

// audits are the store's audit entries of action.
func audits(t *testing.T, store *models.Store, action string) []models.AuditEntry {
	t.Helper()
	entries, _, err := store.AuditEntries(context.Background(), models.AuditFilter{Action: action, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return entries
}
