package web_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"toolbelt/app"
	"toolbelt/models"
	"toolbelt/services/netpolicy"
	"toolbelt/web"
)

// oauthApp is the app served on a real loopback listener whose address is
// its public URL (the issuer and the resources name it), with dynamic
// client registration on.
type oauthApp struct {
	*testApp
	base string
	// resource is what authorizeURL and redeem ask a token for (/mcp
	// unless a test says otherwise).
	resource string
}

func newOAuthApp(t testing.TB, edits ...func(*app.Config)) *oauthApp {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	edits = append([]func(*app.Config){func(c *app.Config) { c.PublicURL, c.OAuthDCR = base, true }}, edits...)
	ta := newTestAppWith(t, hostCaps{}, netpolicy.Policy{}, edits...)
	srv := &http.Server{Handler: ta.handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &oauthApp{testApp: ta, base: base, resource: base + web.MCPPath}
}

// person is a browser of a person: a cookie jar, following no redirect
// so each step of the flow is seen.
type person struct {
	t    testing.TB
	a    *oauthApp
	http *http.Client
}

func (a *oauthApp) person(t testing.TB) *person {
	jar, _ := cookiejar.New(nil)
	return &person{t: t, a: a, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// visit GETs (or POSTs form to) target, absolute or a path of the app.
func (p *person) visit(method, target string, form url.Values) (*http.Response, *goquery.Document) {
	p.t.Helper()
	if strings.HasPrefix(target, "/") {
		target = p.a.base + target
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, target, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Accept", "text/html")
	resp, err := p.http.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	doc, _ := goquery.NewDocumentFromReader(resp.Body)
	return resp, doc
}

// signIn signs in with key through the sign-in form, going on to next.
func (p *person) signIn(key, next string) *http.Response {
	p.t.Helper()
	_, doc := p.visit(http.MethodGet, "/admin/login?next="+url.QueryEscape(next), nil)
	csrf, _ := doc.Find(`input[name="_csrf"]`).Attr("value")
	formNext, _ := doc.Find(`input[name="next"]`).Attr("value")
	resp, _ := p.visit(http.MethodPost, "/admin/login", url.Values{"_csrf": {csrf}, "key": {key}, "next": {formNext}})
	return resp
}

// consentPage follows authorize to the consent page, signing in with key
// on the way, and returns the page.
func (p *person) consentPage(authorizeURL, key string) *goquery.Document {
	p.t.Helper()
	resp, _ := p.visit(http.MethodGet, authorizeURL, nil)
	consent := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(consent, "/admin/oauth/consent?id=") {
		p.t.Fatalf("authorize: %d to %q", resp.StatusCode, consent)
	}
	resp, _ = p.visit(http.MethodGet, consent, nil)
	if loc := resp.Header.Get("Location"); resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(loc, "/admin/login") {
		if resp = p.signIn(key, consent); resp.Header.Get("Location") != consent {
			p.t.Fatalf("sign-in went to %q, not back to %q", resp.Header.Get("Location"), consent)
		}
	}
	resp, doc := p.visit(http.MethodGet, consent, nil)
	if resp.StatusCode != http.StatusOK || doc.Find(`[data-testid="consent"]`).Length() != 1 {
		p.t.Fatalf("consent page: %d", resp.StatusCode)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" || resp.Header.Get("X-Frame-Options") != "DENY" ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		p.t.Fatalf("consent page may be cached or framed: %v", resp.Header)
	}
	return doc
}

// answer posts the consent form's decision and follows it to the
// client's redirect URI, which it returns.
func (p *person) answer(doc *goquery.Document, decision string) *url.URL {
	p.t.Helper()
	csrf, _ := doc.Find(`input[name="_csrf"]`).Attr("value")
	id, _ := doc.Find(`input[name="id"]`).Attr("value")
	resp, _ := p.visit(http.MethodPost, "/admin/oauth/consent", url.Values{"_csrf": {csrf}, "id": {id}, "decision": {decision}})
	for resp.StatusCode == http.StatusSeeOther || resp.StatusCode == http.StatusFound {
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if loc.IsAbs() && !strings.HasPrefix(loc.String(), p.a.base) {
			return loc
		}
		resp, _ = p.visit(http.MethodGet, loc.String(), nil)
	}
	p.t.Fatalf("consent answer: %d, no redirect to the client", resp.StatusCode)
	return nil
}

// fetcher is the go-sdk's AuthorizationCodeFetcher played by a person
// signing in with key and allowing.
func (p *person) fetcher(key string) auth.AuthorizationCodeFetcher {
	return func(_ context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		back := p.answer(p.consentPage(args.URL, key), "allow")
		q := back.Query()
		if q.Get("code") == "" {
			return nil, errors.New("no code: " + back.String())
		}
		return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
	}
}

const oauthRedirect = "http://127.0.0.1:47999/callback"

func (a *oauthApp) oauthHandler(t testing.TB, p *person, key string) *auth.AuthorizationCodeHandler {
	t.Helper()
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "Flow test", RedirectURIs: []string{oauthRedirect}, GrantTypes: []string{"authorization_code", "refresh_token"},
			ResponseTypes: []string{"code"}, TokenEndpointAuthMethod: "none"}},
		RedirectURL:              oauthRedirect,
		AuthorizationCodeFetcher: p.fetcher(key),
		RequestRefreshToken:      true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestOAuthFlowOverMCP is the whole flow as an MCP client makes it with
// the go-sdk: /mcp's 401 → resource metadata → authorization server
// metadata → registration → authorize → sign-in → consent → token →
// tools/list and tools/call → refresh; then the token is refused where it
// is not for, and after its grant is revoked in the console.
func TestOAuthFlowOverMCP(t *testing.T) {
	t.Parallel()
	a := newOAuthApp(t)
	p := a.person(t)
	h := a.oauthHandler(t, p, a.keys["agent"])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "oauth-test", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.base + web.MCPPath, OAuthHandler: h, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if tools := mcpTools(t, cs); tools["search_tools"] == nil {
		t.Fatalf("tools/list: %v", tools)
	}
	if res := mcpCall(t, cs, "search_tools", map[string]any{"query": "read a file", "limit": 3}); res.IsError {
		t.Fatalf("tools/call: %s", mcpText(t, res))
	}

	ts, err := h.TokenSource(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ts.Token()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok.AccessToken, "tbat_") || !strings.HasPrefix(tok.RefreshToken, "tbrt_") {
		t.Fatalf("tokens: %q %q", tok.AccessToken[:5], tok.RefreshToken[:5])
	}
	// RFC 8707: the token is for /mcp, not /api/v1.
	if r := bearerDo(t, a.base+"/api/v1/me", tok.AccessToken); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a token for /mcp at /api/v1: %d", r.StatusCode)
	}
	// Refresh: a new pair; the old refresh token, presented again,
	// revokes them both.
	clientID := grantOf(t, a).ClientID
	conf := &oauth2.Config{ClientID: clientID, Endpoint: oauth2.Endpoint{TokenURL: a.base + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	old := &oauth2.Token{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, Expiry: time.Now().Add(-time.Minute)}
	fresh, err := conf.TokenSource(ctx, old).Token()
	if err != nil {
		t.Fatal(err)
	}
	if fresh.AccessToken == tok.AccessToken || fresh.RefreshToken == tok.RefreshToken {
		t.Fatal("refresh gave the same tokens")
	}
	if r := bearerDo(t, a.base+web.MCPPath, fresh.AccessToken); r.StatusCode == http.StatusUnauthorized {
		t.Fatal("the refreshed token is refused at /mcp")
	}
	if _, err := conf.TokenSource(ctx, old).Token(); err == nil {
		t.Fatal("a rotated refresh token was accepted again")
	}
	if r := bearerDo(t, a.base+web.MCPPath, fresh.AccessToken); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after a refresh token reuse its family still works: %d", r.StatusCode)
	}
}

// bearerDo POSTs an MCP ping (or GETs an API path) with a bearer token.
func bearerDo(t testing.TB, target, token string) *http.Response {
	t.Helper()
	method, body := http.MethodGet, io.Reader(nil)
	if strings.HasSuffix(target, web.MCPPath) {
		method, body = http.MethodPost, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	}
	req, _ := http.NewRequest(method, target, body)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// grantOf is the one grant the app holds.
func grantOf(t testing.TB, a *oauthApp) models.OAuthGrant {
	t.Helper()
	var gs []models.OAuthGrant
	if err := a.store.DB().Where("revoked_at IS NULL").Find(&gs).Error; err != nil || len(gs) != 1 {
		t.Fatalf("grants: %v %v", gs, err)
	}
	return gs[0]
}

// registered registers a public client with the app's DCR endpoint.
func (a *oauthApp) registered(t testing.TB) string {
	t.Helper()
	body := `{"client_name":"Attack test","redirect_uris":["` + oauthRedirect + `"],"grant_types":["authorization_code","refresh_token"],"response_types":["code"],"token_endpoint_auth_method":"none"}`
	resp, err := http.Post(a.base+"/oauth/register", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("register: %d %v", resp.StatusCode, err)
	}
	return out.ClientID
}

// authorizeURL is an authorization request of clientID with PKCE.
func (a *oauthApp) authorizeURL(clientID, verifier string) string {
	return a.base + "/oauth/authorize?" + url.Values{"client_id": {clientID}, "redirect_uri": {oauthRedirect}, "response_type": {"code"},
		"scope": {"tools:read tools:call"}, "state": {"s1"}, "code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)},
		"code_challenge_method": {"S256"}, "resource": {a.resource}}.Encode()
}

// redeem exchanges a code at the token endpoint.
func (a *oauthApp) redeem(t testing.TB, clientID, code, verifier string) (*oauth2.Token, error) {
	conf := &oauth2.Config{ClientID: clientID, RedirectURL: oauthRedirect, Endpoint: oauth2.Endpoint{TokenURL: a.base + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	return conf.Exchange(context.Background(), code, oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", a.resource))
}

// pendingAuthorization registers a client in the app's database and
// starts an authorization request for it, returning the request's id (as
// the consent page gets it).
func pendingAuthorization(t testing.TB, a *testApp) string {
	t.Helper()
	c := &models.OAuthClient{ID: "tbc_" + strings.ToUpper(strings.ReplaceAll(t.Name(), "/", "")), Name: "Pending", RedirectURIs: oauthRedirect}
	if err := a.store.CreateOAuthClient(context.Background(), c); err != nil && !errors.Is(err, models.ErrConflict) {
		t.Fatal(err)
	}
	r := a.do(t, "none", http.MethodGet, "/oauth/authorize?"+url.Values{"client_id": {c.ID}, "redirect_uri": {oauthRedirect},
		"response_type": {"code"}, "scope": {"tools:read"}, "code_challenge": {oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())},
		"code_challenge_method": {"S256"}}.Encode(), nil)
	loc, _ := url.Parse(r.Header.Get("Location"))
	if r.Status != http.StatusFound || loc.Path != "/admin/oauth/consent" {
		t.Fatalf("authorize: %d %s", r.Status, r.Body)
	}
	return loc.Query().Get("id")
}

// TestConsentCSRF: a page of another site (or another session) posting
// the consent form as the signed-in person is refused, and nothing is
// granted.
func TestConsentCSRF(t *testing.T) {
	t.Parallel()
	a := newOAuthApp(t)
	victim, attacker := a.person(t), a.person(t)
	clientID := a.registered(t)
	doc := victim.consentPage(a.authorizeURL(clientID, oauth2.GenerateVerifier()), a.keys["agent"])
	id, _ := doc.Find(`input[name="id"]`).Attr("value")
	other := attacker.consentPage(a.authorizeURL(clientID, oauth2.GenerateVerifier()), a.keys["reviewer"])
	otherCSRF, _ := other.Find(`input[name="_csrf"]`).Attr("value")
	for name, form := range map[string]url.Values{
		"no token":              {"id": {id}, "decision": {"allow"}},
		"another session's one": {"id": {id}, "decision": {"allow"}, "_csrf": {otherCSRF}},
	} {
		if resp, _ := victim.visit(http.MethodPost, "/admin/oauth/consent", form); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d", name, resp.StatusCode)
		}
	}
	var n int64
	a.store.DB().Model(&models.OAuthGrant{}).Count(&n)
	if n != 0 {
		t.Fatalf("%d grants after forged consents", n)
	}
	// The real form still works, once.
	if back := victim.answer(doc, "allow"); back.Query().Get("code") == "" {
		t.Fatalf("allow: %s", back)
	}
}

// TestConsentDeny: Deny sends the browser back to the client's registered
// redirect URI with access_denied, and grants nothing.
func TestConsentDeny(t *testing.T) {
	t.Parallel()
	a := newOAuthApp(t)
	p := a.person(t)
	back := p.answer(p.consentPage(a.authorizeURL(a.registered(t), oauth2.GenerateVerifier()), a.keys["agent"]), "deny")
	if !strings.HasPrefix(back.String(), oauthRedirect) || back.Query().Get("error") != "access_denied" || back.Query().Get("state") != "s1" ||
		back.Query().Get("iss") != a.base {
		t.Fatalf("deny went to %s", back)
	}
	var n int64
	a.store.DB().Model(&models.OAuthGrant{}).Count(&n)
	if n != 0 {
		t.Fatal("deny granted")
	}
}

// TestOAuthRevokedInConsole: an admin revoking a person's authorised
// client on the Access page stops its tokens at once; so does disabling
// the person.
func TestOAuthRevokedInConsole(t *testing.T) {
	t.Parallel()
	a := newOAuthApp(t)
	p := a.person(t)
	clientID, verifier := a.registered(t), oauth2.GenerateVerifier()
	code := p.answer(p.consentPage(a.authorizeURL(clientID, verifier), a.keys["agent"]), "allow").Query().Get("code")
	tok, err := a.redeem(t, clientID, code, verifier)
	if err != nil {
		t.Fatal(err)
	}
	if r := bearerDo(t, a.base+web.MCPPath, tok.AccessToken); r.StatusCode != http.StatusOK {
		t.Fatalf("token at /mcp: %d", r.StatusCode)
	}
	// Redeeming the code again is refused and revokes what it gave.
	if _, err := a.redeem(t, clientID, code, verifier); err == nil {
		t.Fatal("a code redeemed twice")
	}
	if r := bearerDo(t, a.base+web.MCPPath, tok.AccessToken); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the token of a code redeemed twice: %d", r.StatusCode)
	}

	code = p.answer(p.consentPage(a.authorizeURL(clientID, verifier), a.keys["agent"]), "allow").Query().Get("code")
	if tok, err = a.redeem(t, clientID, code, verifier); err != nil {
		t.Fatal(err)
	}
	admin := signedIn(t, a.testApp, "admin")
	pg := admin.get("/admin/access")
	row := pg.TestID("oauth-client-" + clientID)
	if row.Length() != 1 || !strings.Contains(row.Find(`[data-testid="oauth-scopes"]`).Text(), "tools:call") {
		t.Fatalf("the Access page does not list the client")
	}
	action, _ := row.Find("form").Attr("action")
	if pg = admin.post(action, url.Values{}); pg.Status != http.StatusOK || pg.TestID("oauth-client-"+clientID).Length() != 0 {
		t.Fatalf("revoke: %d", pg.Status)
	}
	if r := bearerDo(t, a.base+web.MCPPath, tok.AccessToken); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a revoked grant's token: %d", r.StatusCode)
	}
	var audit int64
	a.store.DB().Model(&models.AuditEntry{}).Where("action = ?", models.AuditOAuthRevoke).Count(&audit)
	if audit != 1 {
		t.Fatalf("%d audit entries for the revocation", audit)
	}

	code = p.answer(p.consentPage(a.authorizeURL(clientID, verifier), a.keys["agent"]), "allow").Query().Get("code")
	if tok, err = a.redeem(t, clientID, code, verifier); err != nil {
		t.Fatal(err)
	}
	if r := a.do(t, "admin", http.MethodPost, "/api/v1/principals/"+itoa(a.ids["agent"])+"/disable", nil); r.Status != http.StatusOK {
		t.Fatalf("disable: %d", r.Status)
	}
	if r := bearerDo(t, a.base+web.MCPPath, tok.AccessToken); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a disabled principal's token: %d", r.StatusCode)
	}
}

// TestSignInNextStaysOnTheConsole: a sign-in link carrying an attacker's
// next lands on the console, never on another origin.
func TestSignInNextStaysOnTheConsole(t *testing.T) {
	t.Parallel()
	a := newOAuthApp(t)
	for _, next := range []string{"//evil.example/x", "/\\evil.example", "https://evil.example/admin", "/admin/%2F%2Fevil.example", "/%2F/evil.example"} {
		p := a.person(t)
		if loc := p.signIn(a.keys["agent"], next).Header.Get("Location"); loc != "/admin" {
			t.Errorf("next=%q: signed in to %q", next, loc)
		}
	}
}

// TestAuthorizationServerMetadata: what discovery reads, and DCR off by
// default (no endpoint, not advertised).
func TestAuthorizationServerMetadata(t *testing.T) {
	t.Parallel()
	a := newOAuthApp(t, func(c *app.Config) { c.OAuthDCR = false })
	meta, err := oauthex.GetAuthServerMeta(context.Background(), a.base+"/.well-known/oauth-authorization-server", a.base, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Issuer != a.base || meta.RegistrationEndpoint != "" || !meta.ClientIDMetadataDocumentSupported ||
		strings.Join(meta.CodeChallengeMethodsSupported, " ") != "S256" {
		t.Fatalf("metadata: %+v", meta)
	}
	resp, err := http.Post(a.base+"/oauth/register", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/oauth/register with DCR off: %d", resp.StatusCode)
	}
	prm := a.do(t, "none", http.MethodGet, web.ResourceMetadataPath+"/mcp", nil).JSON(t)
	if servers, _ := prm["authorization_servers"].([]any); len(servers) != 1 || servers[0] != a.base {
		t.Fatalf("protected resource metadata names %v", prm["authorization_servers"])
	}
}

// TestClusterOAuth runs the flow across two instances over one Postgres
// database and one Redis, as a load balancer would spread it: a person
// signed in on A consents on B without signing in again; a code from A is
// redeemed on B; a refresh token rotated on B and replayed on A revokes
// the family everywhere; a token revoked on A is refused on B.
func TestClusterOAuth(t *testing.T) {
	key := rand.Text() + rand.Text()
	apps := newClusterWith(t, 2, true, netpolicy.Policy{}, func(c *app.Config) {
		c.PublicURL, c.OAuthKey, c.OAuthDCR = "http://127.0.0.1:1", key, true
	})
	var nodes []*oauthApp
	for _, ta := range apps {
		srv := httptest.NewServer(ta.handler)
		t.Cleanup(srv.Close)
		nodes = append(nodes, &oauthApp{testApp: ta, base: srv.URL, resource: ta.app.PublicURL + web.MCPPath})
	}
	a, b := nodes[0], nodes[1]
	p := a.person(t)
	clientID, verifier := a.registered(t), oauth2.GenerateVerifier()
	code := p.answer(p.consentPage(a.authorizeURL(clientID, verifier), a.keys["agent"]), "allow").Query().Get("code")
	tok, err := b.redeem(t, clientID, code, verifier)
	if err != nil {
		t.Fatalf("a code from A redeemed on B: %v", err)
	}
	for _, n := range nodes {
		if r := bearerDo(t, n.base+web.MCPPath, tok.AccessToken); r.StatusCode != http.StatusOK {
			t.Fatalf("token on %s: %d", n.base, r.StatusCode)
		}
	}

	// The console session made on A holds on B: the person's browser (one
	// cookie jar: cookies do not name ports) goes straight to consent.
	onB := &person{t: t, a: b, http: p.http}
	verifier2 := oauth2.GenerateVerifier()
	resp, _ := onB.visit(http.MethodGet, b.authorizeURL(clientID, verifier2), nil)
	consent := resp.Header.Get("Location")
	if resp, _ = onB.visit(http.MethodGet, consent, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("consent on B for a person signed in on A: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	// Refresh rotated on B, the old refresh token replayed on A: the
	// family, the new access token with it, is revoked on both.
	refresh := func(n *oauthApp, rt string) (*http.Response, map[string]any) {
		resp, err := http.PostForm(n.base+"/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt},
			"client_id": {clientID}, "resource": {n.resource}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp, body
	}
	resp, rotated := refresh(b, tok.RefreshToken)
	if resp.StatusCode != http.StatusOK || rotated["access_token"] == nil {
		t.Fatalf("refresh on B: %d %v", resp.StatusCode, rotated)
	}
	if resp, body := refresh(a, tok.RefreshToken); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("the replaced refresh token replayed on A: %d %v", resp.StatusCode, body)
	}
	for _, n := range nodes {
		within(t, "the rotated family refused on "+n.base, func() (bool, string) {
			r := bearerDo(t, n.base+web.MCPPath, rotated["access_token"].(string))
			return r.StatusCode == http.StatusUnauthorized, fmt.Sprint(r.StatusCode)
		})
	}
	if resp, _ := refresh(a, rotated["refresh_token"].(string)); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("the family's newest refresh token after the replay: %d", resp.StatusCode)
	}

	// A fresh grant's token revoked on A is refused on B.
	verifier3 := oauth2.GenerateVerifier()
	code = p.answer(p.consentPage(a.authorizeURL(clientID, verifier3), a.keys["agent"]), "allow").Query().Get("code")
	if tok, err = a.redeem(t, clientID, code, verifier3); err != nil {
		t.Fatal(err)
	}
	if r := bearerDo(t, b.base+web.MCPPath, tok.AccessToken); r.StatusCode != http.StatusOK {
		t.Fatalf("token on B before revocation: %d", r.StatusCode)
	}
	resp, err = http.PostForm(a.base+"/oauth/revoke", url.Values{"token": {tok.AccessToken}, "client_id": {clientID}, "token_type_hint": {"access_token"}})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke on A: %v %v", resp, err)
	}
	resp.Body.Close()
	within(t, "the token revoked on A refused on B", func() (bool, string) {
		r := bearerDo(t, b.base+web.MCPPath, tok.AccessToken)
		return r.StatusCode == http.StatusUnauthorized, fmt.Sprint(r.StatusCode)
	})
}
