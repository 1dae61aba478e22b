package web_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolbelt/app"
	"toolbelt/internal/nodetest"
	"toolbelt/models"
	"toolbelt/services/authserver"
	"toolbelt/services/netpolicy"
	"toolbelt/web"
)

// clientDocServer serves an MCP host's client ID metadata document over
// TLS on loopback, at /oauth/client.json, counting the fetches.
type clientDocServer struct {
	*httptest.Server
	fetches atomic.Int32
}

func newClientDocServer(t *testing.T, name string) *clientDocServer {
	t.Helper()
	s := &clientDocServer{}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		if r.URL.Path != "/oauth/client.json" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=3600")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"client_id": s.ID(), "client_name": name, "client_uri": "https://agent.example/",
			// Any port: the script listens where it can (RFC 8252 §7.3).
			"redirect_uris":  []string{"http://127.0.0.1/callback"},
			"grant_types":    []string{"authorization_code", "refresh_token"},
			"response_types": []string{"code"}, "token_endpoint_auth_method": "none",
		})
	}))
	t.Cleanup(s.Close)
	return s
}

// ID is the document's URL, the client's id.
func (s *clientDocServer) ID() string { return s.URL + "/oauth/client.json" }

// trusting is an outbound policy that reaches the document server: its
// CA trusted, loopback allowed (as an operator allows an internal range).
func (s *clientDocServer) trusting() netpolicy.Policy {
	pool := x509.NewCertPool()
	pool.AddCert(s.Certificate())
	return netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, RootCAs: pool}
}

// tsOAuthLine is one line mcp-oauth.mjs prints.
type tsOAuthLine struct {
	Callback  string `json:"callback"`
	Authorize string `json:"authorize"`
	Token     *struct {
		TokenType    string `json:"token_type"`
		Scope        string `json:"scope"`
		AccessToken  bool   `json:"access_token"`
		RefreshToken bool   `json:"refresh_token"`
	} `json:"token"`
	Tools     []string `json:"tools"`
	Call      *tsToolResult
	Refreshed *struct {
		AccessToken bool `json:"access_token"`
		Rotated     bool `json:"rotated"`
	} `json:"refreshed"`
}

// tsToolResult is a tools/call result as the TypeScript SDK parsed it.
type tsToolResult struct {
	IsError           bool           `json:"isError"`
	StructuredContent map[string]any `json:"structuredContent"`
	Content           []struct{ Text string }
}

// TestMCPOAuthTypeScript signs the official TypeScript SDK in to /mcp as
// a host with a client ID metadata document does (testdata/node/
// mcp-oauth.mjs): /mcp's 401 → resource and authorization server metadata
// → an authorization URL whose client_id is the document's https URL →
// Toolbelt fetches the document → a person signs in and allows on the
// consent page → the code reaches the script's loopback callback (on a
// port the document does not name) → tokens → tools/list and a
// tools/call recorded as the person → the access token spoiled, the SDK
// refreshes and calls again.
func TestMCPOAuthTypeScript(t *testing.T) {
	t.Parallel()
	dir := nodetest.Dir(t)
	doc := newClientDocServer(t, "TypeScript test host")
	a := newOAuthApp(t, func(c *app.Config) { c.NetPolicy = doc.trusting() })
	dangerousWrite(t, a.testApp) // grants the agent the filesystem category

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := `{"path":"oauth.txt","content":"written over OAuth\n"}`
	cmd := exec.CommandContext(ctx, "node", "mcp-oauth.mjs", a.base+web.MCPPath, doc.ID(), "file_write", args, "--refresh")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	var lines []tsOAuthLine
	var callback string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var l tsOAuthLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
		switch {
		case l.Callback != "":
			callback = l.Callback
		case l.Authorize != "":
			checkAuthorizeURL(t, l.Authorize, a.base, doc.ID(), callback)
			// The person: sign in as the agent, read who asks, allow.
			p := a.person(t)
			page := p.consentPage(l.Authorize, a.keys["agent"])
			if text := page.Find(`[data-testid="consent"]`).Text(); !strings.Contains(text, "TypeScript test host") {
				t.Errorf("the consent page does not name the document's client: %s", strings.Join(strings.Fields(text), " "))
			}
			back := p.answer(page, "allow")
			if !strings.HasPrefix(back.String(), callback+"?") || back.Query().Get("code") == "" {
				t.Fatalf("allow went to %s, not the callback %s with a code", back, callback)
			}
			// The browser lands on the script's callback.
			resp, err := http.Get(back.String())
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("the script's callback answered %d", resp.StatusCode)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("mcp-oauth.mjs: %v\n%s", err, stderr.String())
	}
	t.Logf("mcp-oauth.mjs printed %d lines; the document was fetched %d times", len(lines), doc.fetches.Load())

	var token, tools, calls, refreshed int
	for _, l := range lines {
		switch {
		case l.Token != nil:
			token++
			if l.Token.TokenType != "Bearer" || !l.Token.AccessToken || !l.Token.RefreshToken || !strings.Contains(l.Token.Scope, "tools:call") {
				t.Errorf("token response: %+v", *l.Token)
			}
		case l.Tools != nil:
			tools++
			if !slices.Contains(l.Tools, "file_write") || !slices.Contains(l.Tools, "search_tools") || slices.Contains(l.Tools, "shell_exec") {
				t.Errorf("tools/list over OAuth: %v, want the agent's", l.Tools)
			}
		case l.Refreshed != nil:
			refreshed++
			if !l.Refreshed.AccessToken || !l.Refreshed.Rotated {
				t.Errorf("refresh: %+v, want a new access token and a rotated refresh token", *l.Refreshed)
			}
		}
		if l.Call != nil {
			calls++
			if l.Call.IsError {
				t.Errorf("tools/call over OAuth failed: %+v", *l.Call)
			}
		}
	}
	if token != 1 || tools != 1 || calls != 2 || refreshed != 1 {
		t.Fatalf("lines: %d token, %d tools, %d calls, %d refreshed; want 1, 1, 2, 1", token, tools, calls, refreshed)
	}

	// Both calls are in the history as the person who allowed the client.
	history := a.do(t, "admin", http.MethodGet, "/api/v1/calls?tool=file_write", nil).JSON(t)["calls"].([]any)
	if len(history) != 2 {
		t.Fatalf("%d file_write calls in the history, want 2", len(history))
	}
	for _, c := range history {
		if c := c.(map[string]any); c["principal_id"] != float64(a.ids["agent"]) || c["status"] != "succeeded" {
			t.Errorf("call %v: want the agent's, succeeded", c)
		}
	}
	// The grant and its tokens name the document's URL as the client.
	g := grantOf(t, a)
	if g.ClientID != doc.ID() || g.PrincipalID != a.ids["agent"] {
		t.Fatalf("grant: client %q principal %d; want %q, %d", g.ClientID, g.PrincipalID, doc.ID(), a.ids["agent"])
	}
	var tokens []models.OAuthToken
	if err := a.store.DB().Where("grant_id = ?", g.ID).Find(&tokens).Error; err != nil || len(tokens) == 0 {
		t.Fatalf("tokens of the grant: %d %v", len(tokens), err)
	}
	for _, tok := range tokens {
		if tok.ClientID != doc.ID() || tok.PrincipalID != a.ids["agent"] {
			t.Errorf("token %s: client %q principal %d", tok.ID, tok.ClientID, tok.PrincipalID)
		}
	}
}

// checkAuthorizeURL checks the SDK asked the embedded server for a code
// as the document's client, with PKCE S256, for the /mcp resource, to be
// sent to the script's callback.
func checkAuthorizeURL(t *testing.T, raw, base, clientID, callback string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || !strings.HasPrefix(raw, base+"/") {
		t.Fatalf("authorization URL %q is not the app's", raw)
	}
	q := u.Query()
	for k, want := range map[string]string{"client_id": clientID, "redirect_uri": callback, "response_type": "code",
		"code_challenge_method": "S256", "resource": base + web.MCPPath} {
		if q.Get(k) != want {
			t.Errorf("authorization URL %s=%q, want %q", k, q.Get(k), want)
		}
	}
}

// TestClientDocumentFetchRefused is the SSRF attack through the real
// router: an authorization request whose client_id is a metadata document
// on loopback, with the outbound policy as shipped (no private range), is
// refused, and the document server never sees a request; the same
// request under a policy that reaches it goes on to sign-in.
func TestClientDocumentFetchRefused(t *testing.T) {
	t.Parallel()
	doc := newClientDocServer(t, "Loopback host")
	policy := doc.trusting()
	policy.AllowPrivate = nil
	a := newOAuthApp(t, func(c *app.Config) { c.NetPolicy = policy })
	authorize := func(base string) string { return docAuthorizeURL(base, doc.ID(), "http://127.0.0.1:5555/callback") }
	resp, body := a.person(t).visit(http.MethodGet, authorize(a.base), nil)
	if resp.StatusCode < 400 || resp.Header.Get("Location") != "" {
		t.Fatalf("authorize with a loopback document: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if n := doc.fetches.Load(); n != 0 {
		t.Fatalf("the loopback document server got %d requests; want none", n)
	}
	t.Logf("refused: %d %s", resp.StatusCode, strings.Join(strings.Fields(body.Text()), " "))

	// The control: the same request reaches sign-in when the policy
	// allows the document's address.
	b := newOAuthApp(t, func(c *app.Config) { c.NetPolicy = doc.trusting() })
	resp, _ = b.person(t).visit(http.MethodGet, authorize(b.base), nil)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "/admin/oauth/consent?id=") {
		t.Fatalf("authorize with a reachable document: %d to %q", resp.StatusCode, loc)
	}
	if n := doc.fetches.Load(); n != 1 {
		t.Fatalf("the document was fetched %d times; want 1", n)
	}
}

// docAuthorizeURL is an authorization request of a metadata document's
// client for /mcp, with PKCE.
func docAuthorizeURL(base, clientID, redirect string) string {
	return base + "/oauth/authorize?" + url.Values{"client_id": {clientID}, "redirect_uri": {redirect},
		"response_type": {"code"}, "scope": {"tools:read"}, "state": {"s"}, "resource": {base + web.MCPPath},
		"code_challenge": {"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"}, "code_challenge_method": {"S256"}}.Encode()
}

// TestClientDocumentRedirects: an authorization request of a document's
// client may send the code only to a redirect URI the document lists (a
// loopback one on any port); any other is refused without a redirect,
// so the code never leaves for the attacker's URI.
func TestClientDocumentRedirects(t *testing.T) {
	t.Parallel()
	doc := newClientDocServer(t, "Redirect host")
	a := newOAuthApp(t, func(c *app.Config) { c.NetPolicy = doc.trusting() })
	for redirect, allowed := range map[string]bool{
		"http://127.0.0.1:5555/callback":   true,
		"http://127.0.0.1/callback":        true,
		"https://evil.example/callback":    false,
		"http://127.0.0.1:5555/callback/x": false,
		"http://127.0.0.1:5555/other":      false,
		"http://localhost:5555/callback":   false,
		"http://[::1]:5555/callback":       false,
		"http://127.0.0.1:5555/callback#f": false,
	} {
		resp, _ := a.person(t).visit(http.MethodGet, docAuthorizeURL(a.base, doc.ID(), redirect), nil)
		loc := resp.Header.Get("Location")
		if got := resp.StatusCode == http.StatusFound && strings.HasPrefix(loc, "/admin/oauth/consent?id="); got != allowed {
			t.Errorf("redirect_uri %s: %d to %q; allowed %v", redirect, resp.StatusCode, loc, allowed)
		}
		if !allowed && strings.HasPrefix(loc, "http") {
			t.Errorf("redirect_uri %s: the browser is sent to %q", redirect, loc)
		}
	}
}

// TestRegisterRefusesUnsafeClients makes RFC 7591 registrations an
// attacker (or a careless host) would: each is refused with RFC 7591's
// error and a description naming the member, and nothing is stored.
func TestRegisterRefusesUnsafeClients(t *testing.T) {
	t.Parallel()
	a := newOAuthApp(t)
	for body, want := range map[string]string{
		`{"redirect_uris":["https://app.example/cb"],"token_endpoint_auth_method":"client_secret_basic"}`: "invalid_client_metadata",
		`{"redirect_uris":["https://app.example/cb"],"grant_types":["implicit"]}`:                         "invalid_client_metadata",
		`{"redirect_uris":["https://app.example/cb"],"response_types":["token"]}`:                         "invalid_client_metadata",
		`{"client_name":"no redirect"}`:                                                                 "invalid_redirect_uri",
		`{"redirect_uris":["javascript:alert(1)"]}`:                                                     "invalid_redirect_uri",
		`{"redirect_uris":["https://app.example/cb#frag"]}`:                                             "invalid_redirect_uri",
		`{"redirect_uris":["http://app.example/cb"]}`:                                                   "invalid_redirect_uri",
		`{"redirect_uris":["https://app.example/cb"],"client_name":"` + strings.Repeat("n", 101) + `"}`: "invalid_client_metadata",
		`[]`: "invalid_client_metadata",
	} {
		resp, err := http.Post(a.base+"/oauth/register", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Error, ErrorDescription string }
		_ = json.NewDecoder(resp.Body).Decode(&struct {
			Error            *string `json:"error"`
			ErrorDescription *string `json:"error_description"`
		}{&out.Error, &out.ErrorDescription})
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || out.Error != want || out.ErrorDescription == "" {
			t.Errorf("register %s: %d %+v; want 400 %s with a description", body, resp.StatusCode, out, want)
		}
	}
	var n int64
	a.store.DB().Model(&models.OAuthClient{}).Count(&n)
	if n != 0 {
		t.Fatalf("%d clients stored after refused registrations", n)
	}
}

// TestRegistrationFloodRefused: dynamic registration needs no credential,
// so one address may register authserver.RegistrationRate() clients an
// hour; past it the answer is 429 and nothing more is stored.
func TestRegistrationFloodRefused(t *testing.T) {
	t.Parallel()
	a := newOAuthApp(t)
	limit := int(authserver.RegistrationRate().Limit)
	body := `{"client_name":"Flood","redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"none"}`
	status := map[int]int{}
	for range limit + 5 {
		resp, err := http.Post(a.base+"/oauth/register", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		status[resp.StatusCode]++
	}
	if status[http.StatusCreated] != limit || status[http.StatusTooManyRequests] != 5 {
		t.Errorf("answers %v; want %d created and 5 refused", status, limit)
	}
	var n int64
	a.store.DB().Model(&models.OAuthClient{}).Count(&n)
	if n != int64(limit) {
		t.Errorf("%d clients stored; want %d", n, limit)
	}
}
