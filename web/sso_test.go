package web_test

import (
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"toolbelt/app"
	"toolbelt/internal/testidp"
	"toolbelt/models"
	"toolbelt/services/identity"
	"toolbelt/services/netpolicy"
)

// ssoCallback is the console's callback at the identity provider.
const ssoCallback = "/admin/login/oidc/callback"

// ssoFixture is Toolbelt signing its console in through a real OpenID
// provider (internal/testidp: zitadel's op) on loopback.
type ssoFixture struct {
	idp    *testidp.IDP
	app    *testApp
	srv    *httptest.Server
	public string // Toolbelt's public URL
}

// The provider's people: an admin, a reviewer, someone in no mapped group.
var ssoUsers = []testidp.User{
	{Username: "alice", Password: "alice-pw", Email: "alice@example.com", Name: "Alice Example", Groups: []string{"staff", "toolbelt-admins"}},
	{Username: "rita", Password: "rita-pw", Email: "rita@example.com", Name: "Rita Reviewer", Groups: []string{"toolbelt-reviewers"}},
	{Username: "sam", Password: "sam-pw", Email: "sam@example.com", Name: "Sam Staff", Groups: []string{"staff"}},
}

// newSSO starts a provider and Toolbelt configured for it. Toolbelt's
// address is taken first: the provider registers its callback, and
// Toolbelt's public URL is where it listens.
func newSSO(t *testing.T, edits ...func(*app.Config)) *ssoFixture {
	t.Helper()
	return newSSONamed(t, "127.0.0.1", edits...)
}

// newSSONamed is newSSO with Toolbelt's public URL naming it host (a
// loopback name): "localhost" puts it on another site than the
// provider's 127.0.0.1, as a real provider is.
func newSSONamed(t *testing.T, host string, edits ...func(*app.Config)) *ssoFixture {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	public := "http://" + net.JoinHostPort(host, port)
	idp := testidp.Start(t, testidp.Options{Users: ssoUsers, Clients: []testidp.Client{
		{ID: "toolbelt-console", Secret: "console-secret", RedirectURIs: []string{public + ssoCallback}}}})
	sso := func(c *app.Config) {
		c.PublicURL, c.OIDCName = public, "Test IdP"
		// The provider is on loopback: its outbound policy must allow it.
		c.OIDC = identity.Settings{Issuer: idp.Issuer, ClientID: "toolbelt-console", ClientSecret: "console-secret",
			Roles:        identity.RoleMap{Admin: []string{"toolbelt-admins"}, Reviewer: []string{"toolbelt-reviewers"}},
			AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	}
	ta := newTestAppWith(t, hostCaps{}, netpolicy.Policy{}, append([]func(*app.Config){sso}, edits...)...)
	srv := httptest.NewUnstartedServer(ta.handler)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return &ssoFixture{idp: idp, app: ta, srv: srv, public: public}
}

// browser is a cookie-jar browser for Toolbelt and the provider. It
// stops at Toolbelt's callback so a test can read, keep or tamper with
// the provider's answer before delivering it (callback).
func (f *ssoFixture) browser(t *testing.T) *browserClient {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if r.URL.Path == ssoCallback {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	return &browserClient{t: t, srv: f.srv, http: hc}
}

// toProvider starts a sign-in at Toolbelt and follows it to the
// provider's login form, returning the form's auth request id.
func (f *ssoFixture) toProvider(t *testing.T, b *browserClient, next string) string {
	t.Helper()
	p := b.get("/admin/login/oidc?next=" + url.QueryEscape(next))
	id, ok := p.Doc.Find(`input[name="id"]`).Attr("value")
	if p.Status != 200 || !strings.HasPrefix(p.URL, f.idp.Issuer+"/login/username") || !ok {
		t.Fatalf("start sign-in: %d at %s", p.Status, p.URL)
	}
	return id
}

// login fills the provider's real login form and returns where the
// provider sends the browser back (Toolbelt's callback with code and
// state, not yet followed).
func (f *ssoFixture) login(t *testing.T, b *browserClient, authRequest, user, password string) *url.URL {
	t.Helper()
	form := url.Values{"id": {authRequest}, "username": {user}, "password": {password}}
	req, _ := http.NewRequest(http.MethodPost, f.idp.Issuer+"/login/username", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := b.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound || back.Path != ssoCallback {
		t.Fatalf("log in at the provider as %s: %s, back to %q", user, resp.Status, resp.Header.Get("Location"))
	}
	return back
}

// callback delivers the provider's answer to Toolbelt and follows the
// signed-in page on to where it leads.
func (f *ssoFixture) callback(b *browserClient, back *url.URL) page {
	b.t.Helper()
	p := b.get(back.RequestURI())
	if href, ok := p.TestID("continue").Attr("href"); ok && p.Status == 200 {
		return b.get(href)
	}
	return p
}

// signIn signs user in through the provider, asking for next.
func (f *ssoFixture) signIn(t *testing.T, b *browserClient, user, password, next string) page {
	t.Helper()
	return f.callback(b, f.login(t, b, f.toProvider(t, b, next), user, password))
}

// signedInAs reports who the console says is signed in ("" when the
// browser is sent to sign in).
func signedInAs(b *browserClient) string {
	b.t.Helper()
	p := b.get("/admin")
	if strings.Contains(p.URL, "/admin/login") {
		return ""
	}
	return strings.TrimSpace(p.TestID("user").Text())
}

// refusedSignIn checks that p is the sign-in page showing an error
// containing want, and that b is not signed in.
func refusedSignIn(t *testing.T, b *browserClient, p page, status int, want string) {
	t.Helper()
	msg := p.TestID("error-key").Text()
	if p.Status != status || !strings.Contains(msg, want) {
		t.Fatalf("refused sign-in: %d %q, want %d with %q", p.Status, msg, status, want)
	}
	if who := signedInAs(b); who != "" {
		t.Fatalf("signed in as %q after a refused sign-in", who)
	}
}

// auditEntries lists the audit log entries of action (newest first).
func auditEntries(t *testing.T, a *testApp, action string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range a.do(t, "admin", "GET", "/api/v1/audit?action="+action, nil).JSON(t)["entries"].([]any) {
		out = append(out, e.(map[string]any))
	}
	return out
}

func TestSSOSignIn(t *testing.T) {
	t.Parallel()
	f := newSSO(t)
	b := f.browser(t)
	login := b.get("/admin/login")
	if sso := login.TestID("sign-in-sso"); strings.TrimSpace(sso.Text()) != "Sign in with Test IdP" || login.TestID("sign-in-form").Length() != 1 {
		t.Fatalf("sign-in page: SSO %q, key form %d", sso.Text(), login.TestID("sign-in-form").Length())
	}

	p := f.signIn(t, b, "alice", "alice-pw", "/admin/tools")
	if p.Status != 200 || !strings.HasSuffix(p.URL, "/admin/tools") {
		t.Fatalf("after signing in: %d at %s", p.Status, p.URL)
	}
	if who := signedInAs(b); who != "alice" {
		t.Fatalf("signed in as %q, want alice (the principal made for her)", who)
	}
	// An admin page opens: the role came from her group.
	if p := b.get("/admin/access"); p.Status != 200 {
		t.Fatalf("access page: %d", p.Status)
	}
	// The session cookie is the console's usual one.
	for _, c := range b.http.Jar.Cookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(f.srv.URL, "http://"), Path: "/admin"}) {
		if strings.HasPrefix(c.Name, "tb_oidc_") {
			t.Errorf("the sign-in's verifier cookie %s outlived it", c.Name)
		}
	}

	// The audit log names the person and the way in.
	e := auditEntries(t, f.app, models.AuditSignIn)[0]
	if e["actor"] != "alice" || e["detail"] != "sso" || !strings.Contains(e["person"].(string), "Alice Example <alice@example.com>") ||
		!strings.Contains(e["person"].(string), "sub-alice at "+f.idp.Issuer) {
		t.Fatalf("sign-in entry: %v", e)
	}

	// Signing in again is the same principal.
	b2 := f.browser(t)
	f.signIn(t, b2, "alice", "alice-pw", "/admin")
	if who := signedInAs(b2); who != "alice" {
		t.Fatalf("second sign-in as %q", who)
	}
	n := 0
	for _, p := range f.app.do(t, "admin", "GET", "/api/v1/principals", nil).JSON(t)["principals"].([]any) {
		if p.(map[string]any)["name"] == "alice" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d principals named alice, want 1", n)
	}
}

func TestSSOStateRefused(t *testing.T) {
	t.Parallel()
	f := newSSO(t)
	for name, tamper := range map[string]func(q url.Values){
		"missing":  func(q url.Values) { q.Del("state") },
		"mismatch": func(q url.Values) { q.Set("state", "not-the-state-we-sent") },
	} {
		t.Run(name, func(t *testing.T) {
			b := f.browser(t)
			back := f.login(t, b, f.toProvider(t, b, "/admin"), "alice", "alice-pw")
			q := back.Query()
			tamper(q)
			back.RawQuery = q.Encode()
			refusedSignIn(t, b, f.callback(b, back), 401, "start the sign-in again")
		})
	}
	// The provider's own refusal, with the right state, is shown. The
	// authorization request (read without following it) carries PKCE
	// S256, a nonce and the state.
	b := f.browser(t)
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/admin/login/oidc", nil)
	resp, err := (&http.Client{Jar: b.http.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	auth, _ := url.Parse(resp.Header.Get("Location"))
	q := auth.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" || q.Get("state") == "" {
		t.Fatalf("authorization request lacks PKCE S256, nonce or state: %s", auth)
	}
	p := b.get(ssoCallback + "?" + url.Values{"state": {q.Get("state")}, "error": {"access_denied"}, "error_description": {"the user said no"}}.Encode())
	refusedSignIn(t, b, p, 401, "access_denied")
}

func TestSSOCallbackReplayRefused(t *testing.T) {
	t.Parallel()
	f := newSSO(t)
	b := f.browser(t)
	back := f.login(t, b, f.toProvider(t, b, "/admin"), "alice", "alice-pw")
	// Keep the browser's verifier cookie to replay with it.
	jarURL, _ := url.Parse(f.srv.URL + ssoCallback)
	kept := b.http.Jar.Cookies(jarURL)
	if len(kept) == 0 {
		t.Fatal("no verifier cookie before the callback")
	}
	if p := f.callback(b, back); p.Status != 200 || signedInAs(b) != "alice" {
		t.Fatalf("first callback: %d at %s", p.Status, p.URL)
	}

	// The same answer again, from the same browser with its cookie back
	// (and without the session it opened, to see whether another opens).
	b.fresh(t, f)
	b.http.Jar.SetCookies(jarURL, kept)
	refusedSignIn(t, b, f.callback(b, back), 401, "already used")

	// Someone who read the callback URL (a log, a referrer) replays it
	// in their own browser, before the victim's browser does.
	victim := f.browser(t)
	stolen := f.login(t, victim, f.toProvider(t, victim, "/admin"), "alice", "alice-pw")
	attacker := f.browser(t)
	refusedSignIn(t, attacker, f.callback(attacker, stolen), 401, "another browser")
	// The attempt consumed the sign-in: the victim starts again.
	refusedSignIn(t, victim, f.callback(victim, stolen), 401, "already used")
}

// fresh drops b's session cookie, so signedInAs reads only what a replay
// could have opened.
func (b *browserClient) fresh(t *testing.T, f *ssoFixture) *browserClient {
	t.Helper()
	u, _ := url.Parse(f.srv.URL + "/admin")
	jar, _ := cookiejar.New(nil)
	for _, c := range b.http.Jar.Cookies(u) {
		if c.Name != "tb_session" {
			jar.SetCookies(u, []*http.Cookie{c})
		}
	}
	b.http.Jar = jar
	return b
}

func TestSSONonceMismatchRefused(t *testing.T) {
	t.Parallel()
	f := newSSO(t)
	b := f.browser(t)
	back := f.login(t, b, f.toProvider(t, b, "/admin"), "alice", "alice-pw")
	// The stored sign-in expects another nonce than the ID token carries
	// (what a token minted for another sign-in would look like).
	res := f.app.store.DB().Model(&models.OIDCLogin{}).Where("1 = 1").Update("nonce_hash", strings.Repeat("0", 64))
	if res.Error != nil || res.RowsAffected != 1 {
		t.Fatalf("tamper with the pending sign-in: %v, %d rows", res.Error, res.RowsAffected)
	}
	refusedSignIn(t, b, f.callback(b, back), 401, "not issued for this sign-in")

	// A code from one sign-in delivered with another's state (code
	// injection) does not redeem: the PKCE verifier is the other's.
	first := f.login(t, b, f.toProvider(t, b, "/admin"), "alice", "alice-pw")
	second := f.login(t, b, f.toProvider(t, b, "/admin"), "alice", "alice-pw")
	q := second.Query()
	q.Set("code", first.Query().Get("code"))
	second.RawQuery = q.Encode()
	refusedSignIn(t, b, f.callback(b, second), 401, "did not accept the sign-in's code")
}

func TestSSOPersonRefused(t *testing.T) {
	t.Parallel()
	f := newSSO(t)
	principals := func() int {
		return len(f.app.do(t, "admin", "GET", "/api/v1/principals", nil).JSON(t)["principals"].([]any))
	}
	before := principals()
	b := f.browser(t)
	refusedSignIn(t, b, f.signIn(t, b, "sam", "sam-pw", "/admin"), 403, "none of the groups")
	var identities int64
	f.app.store.DB().Model(&models.Identity{}).Count(&identities)
	if after := principals(); after != before || identities != 0 {
		t.Fatalf("a person in no mapped group left %d principals (was %d) and %d identities", after, before, identities)
	}

	// Rita signs in, an admin disables her principal: her session ends
	// and the provider vouching for her again does not let her back in.
	rita := f.browser(t)
	f.signIn(t, rita, "rita", "rita-pw", "/admin")
	if who := signedInAs(rita); who != "rita" {
		t.Fatalf("rita signed in as %q", who)
	}
	var id uint
	f.app.store.DB().Model(&models.Principal{}).Where("name = ?", "rita").Pluck("id", &id)
	if r := f.app.do(t, "admin", "POST", "/api/v1/principals/"+itoa(float64(id))+"/disable", nil); r.Status != 200 {
		t.Fatalf("disable rita: %d %s", r.Status, r.Body)
	}
	if who := signedInAs(rita); who != "" {
		t.Fatalf("a disabled principal's session still open as %q", who)
	}
	again := f.browser(t)
	refusedSignIn(t, again, f.signIn(t, again, "rita", "rita-pw", "/admin"), 401, "disabled")

	refused := auditEntries(t, f.app, models.AuditSignInFailed)
	if len(refused) < 2 || !strings.HasPrefix(refused[0]["detail"].(string), "sso: ") {
		t.Fatalf("refused sign-ins in the audit log: %v", refused)
	}
}

func TestSSONextStaysInConsole(t *testing.T) {
	t.Parallel()
	f := newSSO(t)
	for _, next := range []string{"//evil.example", "https://evil.example/admin", "/\\evil.example", "/adminevil", "/admin/login/oidc"} {
		b := f.browser(t)
		p := f.signIn(t, b, "alice", "alice-pw", next)
		if u, _ := url.Parse(p.URL); p.Status != 200 || u.Host != strings.TrimPrefix(f.srv.URL, "http://") || u.Path != "/admin" {
			t.Fatalf("next=%q: landed %d at %s", next, p.Status, p.URL)
		}
	}
}

func TestSSOKeySignInOff(t *testing.T) {
	t.Parallel()
	f := newSSO(t, func(c *app.Config) { c.KeySignIn = false })
	b := f.browser(t)
	login := b.get("/admin/login")
	if login.TestID("sign-in-form").Length() != 0 || login.TestID("key-sign-in-off").Length() != 1 || login.TestID("sign-in-sso").Length() != 1 {
		t.Fatal("with key sign-in off the sign-in page still offers the key form, or not the provider")
	}
	// The form posted anyway (a scripted attempt) is refused.
	p := b.post("/admin/login", url.Values{"key": {f.app.keys["admin"]}, "_csrf": {"x"}})
	refusedSignIn(t, b, p, 403, "TOOLBELT_KEY_SIGNIN=off")
	// Keys still work on the API; people still sign in through the provider.
	if r := f.app.do(t, "admin", "GET", "/api/v1/me", nil); r.Status != 200 {
		t.Fatalf("API with a key: %d", r.Status)
	}
	f.signIn(t, b, "alice", "alice-pw", "/admin")
	if who := signedInAs(b); who != "alice" {
		t.Fatalf("SSO with key sign-in off: signed in as %q", who)
	}
}

func TestSSOReviewerDecisionNamesThePerson(t *testing.T) {
	t.Parallel()
	f := newSSO(t)
	dangerousWrite(t, f.app)
	_, approval := dangerousCall(t, f.app, "agent", "by a person")

	rita := f.browser(t)
	f.signIn(t, rita, "rita", "rita-pw", "/admin")
	rita.get("/admin/approvals")
	if p := rita.post("/admin/approvals/"+approval+"/approve", url.Values{"reason": {"looked at it"}}); p.Status != 200 {
		t.Fatalf("approve in the console: %d", p.Status)
	}

	var got map[string]any
	for _, a := range f.app.do(t, "admin", "GET", "/api/v1/approvals?status=all", nil).JSON(t)["approvals"].([]any) {
		if a := a.(map[string]any); a["id"] == approval {
			got = a
		}
	}
	person, _ := got["decider_name"].(string)
	if got["decided_via"] != "console sso" || !strings.Contains(person, "Rita Reviewer <rita@example.com>") || !strings.Contains(person, "sub-rita at "+f.idp.Issuer) {
		t.Fatalf("approval as the API shows it: %v", got)
	}
	e := auditEntries(t, f.app, models.AuditApprovalApprove)[0]
	if e["actor"] != "rita" || e["person"] != person || e["via"] != "console" {
		t.Fatalf("approval's audit entry: %v", e)
	}
	if by := rita.get("/admin/approvals").TestID("decided-by").First().Text(); !strings.Contains(by, "rita (Rita Reviewer <rita@example.com>") {
		t.Fatalf("approvals page: decided by %q", by)
	}

	// A key's decision names no person.
	_, other := dangerousCall(t, f.app, "agent", "by a key")
	if r := f.app.do(t, "reviewer", "POST", "/api/v1/approvals/"+other+"/approve", map[string]any{"reason": "ok"}); r.Status != 200 {
		t.Fatalf("approve with a key: %d %s", r.Status, r.Body)
	}
	for _, a := range f.app.do(t, "admin", "GET", "/api/v1/approvals?status=all", nil).JSON(t)["approvals"].([]any) {
		if a := a.(map[string]any); a["id"] == other && (a["decided_via"] != "api" || a["decider_name"] != nil) {
			t.Fatalf("a key's decision: %v", a)
		}
	}
}
