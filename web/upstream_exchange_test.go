package web_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"toolbelt/app"
	"toolbelt/internal/poll"
	"toolbelt/internal/testidp"
	"toolbelt/models"
	"toolbelt/services/identity"
	"toolbelt/services/netpolicy"
	"toolbelt/web"
)

// TestExchangeUpstreamThroughTheRouter: with TOOLBELT_OAUTH=oidc, an
// admin registers an upstream of auth type exchange with their own
// provider token (its tools are listed as them, by exchange); two
// people's calls over REST and MCP reach it as themselves; an upstream
// whose audience the provider does not allow Toolbelt is refused at
// registration; an async call and a call with an API key fail
// UPSTREAM_NOT_CONNECTED saying why, with nothing sent; no subject or
// minted token is in the database or the log.
func TestExchangeUpstreamThroughTheRouter(t *testing.T) {
	t.Parallel()
	idp := testidp.Start(t, testidp.Options{Users: []testidp.User{
		{Username: "ada", Password: "pw", Groups: []string{"tb-admins"}},
		{Username: "grace", Password: "pw", Groups: []string{"tb-admins"}},
	}})
	wiki, other := idp.StartUpstream(t), idp.StartUpstream(t)
	loop := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	ta := newTestAppWith(t, hostCaps{Sandbox: true}, netpolicy.Policy{AllowPrivate: loop}, func(c *app.Config) {
		c.OAuth = app.OAuthOIDC
		c.OIDC = identity.Settings{Issuer: idp.Issuer, ClientID: "toolbelt", ClientSecret: "tb-secret",
			Roles: identity.RoleMap{Admin: []string{"tb-admins"}}, AllowPrivate: loop}
	})
	pub := ta.app.PublicURL
	idp.AddClient(testidp.Client{ID: "api", Resource: pub + "/api/v1"})
	idp.AddClient(testidp.Client{ID: "mcp", Resource: pub + web.MCPPath})
	idp.AddClient(testidp.Client{ID: "toolbelt", Secret: "tb-secret", ExchangeFrom: []string{pub + "/api/v1", pub + web.MCPPath},
		ExchangeTo: []string{wiki.URL}})
	subjects := map[string]string{}
	for _, who := range []string{"ada", "grace"} {
		ta.keys[who] = idp.AccessToken(t, who, "api", "openid", "tools:read", "tools:call", "admin")
		subjects[who] = ta.keys[who]
	}

	upstream := func(name, url string) map[string]any {
		return map[string]any{"name": name, "transport": "http", "url": url, "category": "api",
			"auth": map[string]any{"type": "exchange", "audience": url}}
	}
	if r := ta.do(t, "ada", http.MethodPost, "/api/v1/upstreams", upstream("wiki", wiki.URL)); r.Status != http.StatusCreated ||
		!strings.Contains(string(r.Body), `"accepted":["wiki__whoami"]`) {
		t.Fatalf("register wiki: %d %s", r.Status, r.Body)
	}
	if r := ta.do(t, "ada", http.MethodPost, "/api/v1/upstreams", upstream("other", other.URL)); r.Status != http.StatusUnprocessableEntity ||
		!strings.Contains(string(r.Body), "invalid_target") {
		t.Errorf("register an upstream the provider does not allow: %d %s", r.Status, r.Body)
	}

	for _, who := range []string{"ada", "grace"} {
		r := ta.do(t, who, http.MethodPost, "/api/v1/calls", map[string]any{"tool": "wiki__whoami", "arguments": map[string]any{}})
		if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"subject":"sub-`+who+`"`) {
			t.Errorf("%s over REST: %d %s", who, r.Status, r.Body)
		}
	}
	srv := httptest.NewServer(ta.handler)
	t.Cleanup(srv.Close)
	grace := idp.AccessToken(t, "grace", "mcp", "tools:read", "tools:call")
	subjects["grace-mcp"] = grace
	cs, err := mcpConnectWith(t, srv, bearer{key: grace, next: http.DefaultTransport})
	if err != nil {
		t.Fatal(err)
	}
	if res := mcpCall(t, cs, "wiki__whoami", map[string]any{}); res.IsError || !strings.Contains(mcpText(t, res), "sub-grace") {
		t.Errorf("grace over MCP: %s", mcpText(t, res))
	}
	if got := strings.Join(wiki.Subjects(), " "); got != "sub-ada sub-grace sub-grace" {
		t.Errorf("the upstream's log: %s", got)
	}

	// No token to exchange: nothing is sent upstream.
	seen := len(wiki.Subjects())
	r := ta.do(t, "ada", http.MethodPost, "/api/v1/calls", map[string]any{"tool": "wiki__whoami", "arguments": map[string]any{}, "async": true})
	id, _ := r.JSON(t)["call_id"].(string)
	var async string
	poll.Until(t, 20*time.Second, "the async call to end", func() (bool, string) {
		async = string(ta.do(t, "ada", http.MethodGet, "/api/v1/calls/"+id, nil).Body)
		return strings.Contains(async, `"status":"failed"`) || strings.Contains(async, `"status":"succeeded"`), async
	})
	if !strings.Contains(async, models.CodeUpstreamNotConnected) || !strings.Contains(async, "background") || !strings.Contains(async, "without async") {
		t.Errorf("async: %s", async)
	}
	r = ta.do(t, "admin", http.MethodPost, "/api/v1/calls", map[string]any{"tool": "wiki__whoami", "arguments": map[string]any{}})
	if !strings.Contains(string(r.Body), models.CodeUpstreamNotConnected) || !strings.Contains(string(r.Body), "API key") {
		t.Errorf("with an API key: %d %s", r.Status, r.Body)
	}
	if len(wiki.Subjects()) != seen {
		t.Error("a call without a token to exchange reached the upstream")
	}

	ta.invoker.Flush()
	db := ta.stored(t)
	for name, tok := range subjects {
		if strings.Contains(db, tok) || strings.Contains(ta.logs.String(), tok) {
			t.Errorf("%s's token is in the database or the log", name)
		}
	}
	if strings.Contains(db, "eyJ") || strings.Contains(ta.logs.String(), "eyJ") {
		t.Error("a JWT (a minted token) is in the database or the log")
	}
}
