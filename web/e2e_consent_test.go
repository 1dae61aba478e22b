package web_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"

	"toolbelt/internal/nodetest"
)

// TestE2EConsent: an agent host sends a person's browser to authorize;
// Chromium is sent to the console's sign-in, signs in with the agent's
// key, sees the consent page name the client, where its answer goes,
// that it is new, the scopes and the principal, passes axe's WCAG rules,
// clicks Allow and lands on the client's redirect URI with a code the
// client redeems for a token that lists tools at /mcp.
func TestE2EConsent(t *testing.T) {
	axe, err := os.ReadFile(filepath.Join(nodetest.Dir(t), "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	a := newOAuthApp(t)
	codes := make(chan url.Values, 1)
	client := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case codes <- r.URL.Query():
		default:
		}
		_, _ = w.Write([]byte("<!doctype html><title>Back in the app</title><p>You may close this window."))
	}))
	t.Cleanup(client.Close)
	redirect := client.URL + "/cb"
	resp, err := http.Post(a.base+"/oauth/register", "application/json", strings.NewReader(
		`{"client_name":"Browser Agent","redirect_uris":["`+redirect+`"],"grant_types":["authorization_code","refresh_token"],"response_types":["code"],"token_endpoint_auth_method":"none"}`))
	if err != nil {
		t.Fatal(err)
	}
	var reg struct {
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reg); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("register: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	conf := &oauth2.Config{ClientID: reg.ClientID, RedirectURL: redirect, Scopes: []string{"tools:read", "tools:call"},
		Endpoint: oauth2.Endpoint{AuthURL: a.base + "/oauth/authorize", TokenURL: a.base + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	authorize := conf.AuthCodeURL("st-1", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", a.resource))

	e := newE2EAt(t, a.testApp, a.base)
	e.run("authorize, sent to sign in",
		chromedp.Navigate(authorize),
		chromedp.WaitVisible(tid("sign-in-form")),
		chromedp.SendKeys(chromedp.CSS("#key"), a.keys["agent"]),
		chromedp.Click(tid("sign-in")),
		chromedp.WaitVisible(tid("consent")),
		loaded(),
	)
	for sel, want := range map[string]string{"client-name": "Browser Agent", "consent-principal": "test-agent", "consent-role": "agent",
		"redirect-host": strings.TrimPrefix(client.URL, "http://")} {
		if got := e.text(tid(sel)); got != want {
			t.Errorf("consent page %s: %q, want %q", sel, got, want)
		}
	}
	if !e.visible(`[data-testid="first-time"]`) {
		t.Error("a client never allowed is not marked new")
	}
	if scopes := e.text(tid("consent-scopes")); !strings.Contains(scopes, "tools:read") || !strings.Contains(scopes, "tools:call") {
		t.Errorf("scopes shown: %q", scopes)
	}
	if violations := e.axeViolations(axe); len(violations) > 0 {
		t.Errorf("consent page, %d rules:\n  %s", len(violations), strings.Join(violations, "\n  "))
	}

	e.run("allow", chromedp.Click(tid("allow")), chromedp.WaitVisible(chromedp.CSS("p")), loaded())
	q := <-codes
	if q.Get("state") != "st-1" || q.Get("iss") != a.app.PublicURL || q.Get("code") == "" {
		t.Fatalf("back at the client with %v", q)
	}
	tok, err := conf.Exchange(t.Context(), q.Get("code"), oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", a.resource))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok.AccessToken, "tbat_") {
		t.Fatalf("access token %q…", tok.AccessToken[:min(8, len(tok.AccessToken))])
	}
	r := bearerDo(t, a.base+"/api/v1/tools", tok.AccessToken)
	if r.StatusCode != http.StatusUnauthorized {
		t.Errorf("a token for /mcp at /api/v1: %d", r.StatusCode)
	}
	if r := bearerDo(t, a.base+"/mcp", tok.AccessToken); r.StatusCode != http.StatusOK {
		t.Errorf("the token at /mcp: %d", r.StatusCode)
	}
}
