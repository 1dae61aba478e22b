package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/oauth2"

	"toolbelt/internal/dbtest"
	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/access"
	"toolbelt/services/clientdoc"
	"toolbelt/services/netpolicy"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const (
	public   = "http://127.0.0.1:8080"
	mcp      = public + "/mcp"
	api      = public + "/api/v1"
	callback = "http://127.0.0.1:9999/cb"
)

// fixture is a server over a real store, a person and a registered client.
type fixture struct {
	t        *testing.T
	s        *Server
	store    *models.Store
	person   *models.Principal
	client   string
	revokes  atomic.Int64
	verifier string
}

func newFixture(t *testing.T, store *models.Store, role string) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{t: t, store: store, verifier: oauth2.GenerateVerifier()}
	var err error
	f.s, err = New(ctx, Deps{Store: store, PublicURL: public, Key: []byte(strings.Repeat("k", 32)), Log: slog.New(slog.DiscardHandler),
		ClientDocs: clientdoc.NewFetcher(netpolicy.Policy{}.Client(), clientdoc.Options{}),
		OnRevoke:   []func(context.Context){func(context.Context) { f.revokes.Add(1) }}})
	if err != nil {
		t.Fatal(err)
	}
	f.person = &models.Principal{Name: "ada-" + role, Role: role}
	if err := store.CreatePrincipal(ctx, f.person, &models.APIKey{Prefix: "tb_x", Hash: rand32(t)}); err != nil {
		t.Fatal(err)
	}
	f.client = f.register("Test client")
	return f
}

// register registers a client as RFC 7591 asks.
func (f *fixture) register(name string) string {
	f.t.Helper()
	c, err := f.s.RegisterClient(context.Background(), "192.0.2.1", []byte(`{"client_name":"`+name+`","redirect_uris":["`+callback+`"],
		"grant_types":["authorization_code","refresh_token"],"response_types":["code"],"token_endpoint_auth_method":"none"}`))
	if err != nil {
		f.t.Fatal(err)
	}
	return c.ID
}

func rand32(t *testing.T) string { t.Helper(); return hash(t.Name() + newID()) }

func (f *fixture) do(method, target string, form url.Values) *httptest.ResponseRecorder {
	f.t.Helper()
	var r *http.Request
	if method == http.MethodPost {
		r = httptest.NewRequest(method, target, strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		r = httptest.NewRequest(method, target+"?"+form.Encode(), nil)
	}
	w := httptest.NewRecorder()
	f.s.Handler().ServeHTTP(w, r)
	return w
}

// authorize starts a request with params changed by edit and returns the
// response.
func (f *fixture) authorize(edit func(url.Values)) *httptest.ResponseRecorder {
	q := url.Values{"client_id": {f.client}, "redirect_uri": {callback}, "response_type": {"code"}, "state": {"st8"},
		"scope": {"tools:read tools:call"}, "code_challenge": {oauth2.S256ChallengeFromVerifier(f.verifier)},
		"code_challenge_method": {"S256"}, "resource": {mcp}}
	if edit != nil {
		edit(q)
	}
	return f.do(http.MethodGet, AuthorizePath, q)
}

// consented runs authorize and consent and returns the code.
func (f *fixture) code(edit func(url.Values)) string {
	f.t.Helper()
	w := f.authorize(edit)
	loc, _ := url.Parse(w.Header().Get("Location"))
	if w.Code != http.StatusFound || loc.Path != ConsentPath {
		f.t.Fatalf("authorize: %d %s %s", w.Code, w.Header().Get("Location"), w.Body)
	}
	next, err := f.s.Allow(context.Background(), loc.Query().Get("id"), f.person)
	if err != nil {
		f.t.Fatal(err)
	}
	u, _ := url.Parse(next)
	w = f.do(http.MethodGet, u.Path, u.Query())
	back, _ := url.Parse(w.Header().Get("Location"))
	if w.Code != http.StatusFound || !strings.HasPrefix(back.String(), callback) || back.Query().Get("state") != "st8" || back.Query().Get("iss") != public {
		f.t.Fatalf("callback: %d %s %s", w.Code, back, w.Body)
	}
	return back.Query().Get("code")
}

type tokenResponse struct {
	Access  string `json:"access_token"`
	Refresh string `json:"refresh_token"`
	Scope   string `json:"scope"`
	Error   string `json:"error"`
	Desc    string `json:"error_description"`
	status  int
}

func (f *fixture) token(form url.Values) tokenResponse {
	f.t.Helper()
	form.Set("client_id", f.client)
	w := f.do(http.MethodPost, TokenPath, form)
	var out tokenResponse
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		f.t.Fatalf("token: %d %s", w.Code, w.Body)
	}
	out.status = w.Code
	return out
}

func (f *fixture) redeem(code string) tokenResponse {
	return f.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {callback},
		"code_verifier": {f.verifier}, "resource": {mcp}})
}

func (f *fixture) refresh(rt string) tokenResponse {
	return f.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "resource": {mcp}})
}

// works says whether an access token is accepted for /mcp.
func (f *fixture) works(at string) bool {
	f.t.Helper()
	_, err := f.s.Tokens().Verify(context.Background(), at, mcp)
	if err != nil && !errors.Is(err, models.ErrUnauthorized) {
		f.t.Fatal(err)
	}
	return err == nil
}

func TestCodeFlowIssuesTokensForTheResource(t *testing.T) {
	modelstest.Each(t, func(t *testing.T, store *models.Store) {
		f := newFixture(t, store, access.RoleAgent)
		tok := f.redeem(f.code(nil))
		if tok.status != http.StatusOK || !strings.HasPrefix(tok.Access, AccessPrefix) || !strings.HasPrefix(tok.Refresh, RefreshPrefix) {
			t.Fatalf("token response: %+v", tok)
		}
		g, err := f.s.Tokens().Verify(context.Background(), tok.Access, mcp+"/")
		if err != nil {
			t.Fatal(err)
		}
		if g.Principal.ID != f.person.ID || g.ClientID != f.client || strings.Join(g.Scopes, " ") != "tools:read tools:call offline_access" || g.Issuer != public {
			t.Fatalf("grant: %+v", g)
		}
		// RFC 8707: a token for /mcp is no good at /api/v1.
		if _, err := f.s.Tokens().Verify(context.Background(), tok.Access, api); !errors.Is(err, models.ErrUnauthorized) {
			t.Fatalf("token for /mcp accepted at /api/v1: %v", err)
		}
		if _, err := f.s.Tokens().Verify(context.Background(), "tb_notmine", mcp); !errors.Is(err, access.ErrNotMine) {
			t.Fatalf("an API key: %v", err)
		}
		if f.works(AccessPrefix + "forged") {
			t.Fatal("a forged token works")
		}
		// Nothing secret is stored as issued: the refresh token as its hash.
		var clear, hashed int64
		store.DB().Model(&models.OAuthToken{}).Where("hash = ? OR id = ?", tok.Refresh, tok.Access).Count(&clear)
		store.DB().Model(&models.OAuthToken{}).Where("hash = ?", hash(tok.Refresh)).Count(&hashed)
		if clear != 0 || hashed != 1 {
			t.Fatalf("refresh token stored: %d in clear, %d hashed", clear, hashed)
		}
	})
}

func TestScopesAreBoundByTheRole(t *testing.T) {
	t.Parallel()
	store, _ := modelstest.Store(t)
	f := newFixture(t, store, access.RoleReviewer)
	w := f.authorize(func(q url.Values) { q.Set("scope", "tools:read tools:call admin") })
	loc, _ := url.Parse(w.Header().Get("Location"))
	p, err := f.s.Pending(context.Background(), loc.Query().Get("id"), f.person)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Scopes, " ") != "tools:read" || strings.Join(p.Refused, " ") != "tools:call admin" {
		t.Fatalf("pending: %+v", p)
	}
}

func TestAuthorizeRefusesWithoutS256PKCE(t *testing.T) {
	t.Parallel()
	store, _ := modelstest.Store(t)
	f := newFixture(t, store, access.RoleAgent)
	for name, edit := range map[string]func(url.Values){
		"missing":   func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") },
		"plain":     func(q url.Values) { q.Set("code_challenge", f.verifier); q.Set("code_challenge_method", "plain") },
		"no method": func(q url.Values) { q.Del("code_challenge_method") },
	} {
		w := f.authorize(edit)
		loc, _ := url.Parse(w.Header().Get("Location"))
		if loc.Path == ConsentPath || loc.Query().Get("error") != "invalid_request" {
			t.Errorf("%s: %d %s %s", name, w.Code, loc, w.Body)
		}
	}
}

func TestAuthorizeRefusesAnUnregisteredRedirectWithoutGoingThere(t *testing.T) {
	t.Parallel()
	store, _ := modelstest.Store(t)
	f := newFixture(t, store, access.RoleAgent)
	for _, evil := range []string{"https://evil.example/cb", "http://127.0.0.1:9999/other", callback + "?x=1"} {
		w := f.authorize(func(q url.Values) { q.Set("redirect_uri", evil) })
		if w.Code != http.StatusBadRequest || w.Header().Get("Location") != "" {
			t.Errorf("%s: %d to %q", evil, w.Code, w.Header().Get("Location"))
		}
	}
}

func TestAuthorizeRefusesAResourceNotServed(t *testing.T) {
	t.Parallel()
	store, _ := modelstest.Store(t)
	f := newFixture(t, store, access.RoleAgent)
	for _, r := range []string{"https://other.example/mcp", public + "/admin", public} {
		w := f.authorize(func(q url.Values) { q.Set("resource", r) })
		loc, _ := url.Parse(w.Header().Get("Location"))
		if loc.Query().Get("error") != "invalid_target" {
			t.Errorf("%s: %d %s", r, w.Code, loc)
		}
	}
	// A code for /mcp cannot be redeemed for /api/v1.
	code := f.code(nil)
	tok := f.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {callback},
		"code_verifier": {f.verifier}, "resource": {api}})
	if tok.Access != "" || tok.Error == "" {
		t.Fatalf("code for /mcp redeemed for /api/v1: %+v", tok)
	}
	// Absent, the resource is /mcp.
	tok = f.token(url.Values{"grant_type": {"authorization_code"}, "code": {f.code(func(q url.Values) { q.Del("resource") })},
		"redirect_uri": {callback}, "code_verifier": {f.verifier}})
	if !f.works(tok.Access) {
		t.Fatalf("no resource: %+v", tok)
	}
}

func TestCodeUsedTwiceRevokesItsTokens(t *testing.T) {
	modelstest.Each(t, func(t *testing.T, store *models.Store) {
		f := newFixture(t, store, access.RoleAgent)
		code := f.code(nil)
		first := f.redeem(code)
		if !f.works(first.Access) {
			t.Fatal("first redemption gave no working token")
		}
		again := f.redeem(code)
		if again.Access != "" || again.Error != "invalid_grant" {
			t.Fatalf("second redemption: %+v", again)
		}
		if f.works(first.Access) {
			t.Fatal("the token of a code used twice still works")
		}
		if r := f.refresh(first.Refresh); r.Access != "" {
			t.Fatalf("the refresh token of a code used twice still works: %+v", r)
		}
		if f.revokes.Load() == 0 {
			t.Fatal("other instances were not told")
		}
	})
}

func TestCodeNeedsItsVerifier(t *testing.T) {
	t.Parallel()
	store, _ := modelstest.Store(t)
	f := newFixture(t, store, access.RoleAgent)
	code := f.code(nil)
	f.verifier = oauth2.GenerateVerifier()
	if tok := f.redeem(code); tok.Access != "" || tok.Error != "invalid_grant" {
		t.Fatalf("code redeemed with another verifier: %+v", tok)
	}
}

func TestRefreshRotatesAndReuseRevokesTheFamily(t *testing.T) {
	modelstest.Each(t, func(t *testing.T, store *models.Store) {
		f := newFixture(t, store, access.RoleAgent)
		first := f.redeem(f.code(nil))
		second := f.refresh(first.Refresh)
		if second.status != http.StatusOK || second.Refresh == first.Refresh || !f.works(second.Access) {
			t.Fatalf("refresh: %+v", second)
		}
		// The replaced refresh token, presented again (a thief's copy).
		if r := f.refresh(first.Refresh); r.Access != "" || r.Error != "invalid_grant" {
			t.Fatalf("reused refresh token: %+v", r)
		}
		if f.works(second.Access) || f.works(first.Access) {
			t.Fatal("tokens of a family whose refresh token was reused still work")
		}
		if r := f.refresh(second.Refresh); r.Access != "" {
			t.Fatalf("the family's newest refresh token still works: %+v", r)
		}
	})
}

func TestRevocationEndpoint(t *testing.T) {
	t.Parallel()
	store, _ := modelstest.Store(t)
	f := newFixture(t, store, access.RoleAgent)
	tok := f.redeem(f.code(nil))
	revoke := func(token, hint, clientID string) int {
		return f.do(http.MethodPost, RevokePath, url.Values{"token": {token}, "token_type_hint": {hint}, "client_id": {clientID}}).Code
	}
	other := f.register("other")
	if code := revoke(tok.Access, "access_token", other); code == http.StatusOK || !f.works(tok.Access) {
		t.Fatalf("another client revoked the token: %d", code)
	}
	if code := revoke(tok.Access, "access_token", f.client); code != http.StatusOK || f.works(tok.Access) {
		t.Fatalf("revoke access token: %d", code)
	}
	tok = f.redeem(f.code(nil))
	if code := revoke(tok.Refresh, "refresh_token", f.client); code != http.StatusOK {
		t.Fatalf("revoke refresh token: %d", code)
	}
	if f.works(tok.Access) || f.refresh(tok.Refresh).Access != "" {
		t.Fatal("revoking the refresh token left its family working")
	}
	if code := revoke("tbrt_unknown", "", f.client); code != http.StatusOK {
		t.Fatalf("unknown token: %d (RFC 7009 answers 200)", code)
	}
}

func TestRevokedGrantAndDisabledPrincipal(t *testing.T) {
	t.Parallel()
	store, _ := modelstest.Store(t)
	f := newFixture(t, store, access.RoleAgent)
	ctx := context.Background()
	tok := f.redeem(f.code(nil))
	grants, _ := f.s.Grants(ctx)
	if len(grants) != 1 || grants[0].LastUsedAt == nil {
		t.Fatalf("grants: %+v", grants)
	}
	if _, err := f.s.RevokeGrant(ctx, grants[0].ID, nil); err != nil {
		t.Fatal(err)
	}
	if f.works(tok.Access) || f.refresh(tok.Refresh).Access != "" {
		t.Fatal("tokens of a revoked grant still work")
	}
	tok = f.redeem(f.code(nil))
	if !f.works(tok.Access) {
		t.Fatal("consenting again gave no working token")
	}
	if _, err := store.SetPrincipalDisabled(ctx, f.person.ID, true, func(*models.Principal, int64) error { return nil }); err != nil {
		t.Fatal(err)
	}
	f.s.Tokens().Forget() // what Accounts' OnRevoke does
	if f.works(tok.Access) || f.refresh(tok.Refresh).Access != "" {
		t.Fatal("a disabled principal's tokens still work")
	}
}

func TestMetadata(t *testing.T) {
	t.Parallel()
	store, _ := modelstest.Store(t)
	f := newFixture(t, store, access.RoleAgent)
	m := f.s.Metadata(context.Background())
	if m["issuer"] != public || m["authorization_endpoint"] != public+AuthorizePath || m["token_endpoint"] != public+TokenPath ||
		m["client_id_metadata_document_supported"] != true || m["authorization_response_iss_parameter_supported"] != true {
		t.Fatalf("metadata: %v", m)
	}
	if ms, _ := json.Marshal(m["code_challenge_methods_supported"]); string(ms) != `["S256"]` {
		t.Fatalf("code_challenge_methods_supported: %s", ms)
	}
	if _, ok := m["registration_endpoint"]; ok {
		t.Fatal("registration_endpoint advertised with DCR off")
	}
}

// A client known by its metadata document: the document's redirect URIs
// and name are what the server trusts; another redirect URI is refused
// without going there.
func TestClientIDMetadataDocument(t *testing.T) {
	t.Parallel()
	doc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"client_id": "https://" + r.Host + r.URL.Path, "client_name": "Doc Agent",
			"redirect_uris": []string{"http://127.0.0.1/cb"}, "grant_types": []string{"authorization_code", "refresh_token"},
			"response_types": []string{"code"}, "token_endpoint_auth_method": "none"})
	}))
	t.Cleanup(doc.Close)
	store, _ := modelstest.Store(t)
	f := newFixture(t, store, access.RoleAgent)
	// The test server's certificate trusted, on loopback (the app's
	// fetcher uses the outbound policy's client, which refuses it).
	f.s.docs = clientdoc.NewFetcher(doc.Client(), clientdoc.Options{})
	f.client = doc.URL + "/client.json"
	// A loopback redirect URI matches on any port (RFC 8252 §7.3).
	w := f.authorize(func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1:9999/cb") })
	loc, _ := url.Parse(w.Header().Get("Location"))
	if w.Code != http.StatusFound || loc.Path != ConsentPath {
		t.Fatalf("authorize: %d %s %s", w.Code, loc, w.Body)
	}
	p, err := f.s.Pending(context.Background(), loc.Query().Get("id"), f.person)
	if err != nil || p.ClientName != "Doc Agent" || p.ClientID != f.client || p.RedirectHost != "127.0.0.1:9999" {
		t.Fatalf("pending: %+v %v", p, err)
	}
	if tok := f.redeem(f.code(nil)); !f.works(tok.Access) {
		t.Fatalf("token: %+v", tok)
	}
	w = f.authorize(func(q url.Values) { q.Set("redirect_uri", "https://evil.example/cb") })
	if w.Code != http.StatusBadRequest || w.Header().Get("Location") != "" {
		t.Fatalf("a redirect URI the document does not list: %d to %q", w.Code, w.Header().Get("Location"))
	}
}
