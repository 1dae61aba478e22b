package web_test

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"toolbelt/internal/oauthupstream"
	"toolbelt/services/netpolicy"
)

// TestUpstreamClientDocument: Toolbelt's client ID metadata document is
// public, names its own URL as the client id and the console's callback
// as the one redirect URI, and is a public client (no secret to keep).
func TestUpstreamClientDocument(t *testing.T) {
	t.Parallel()
	a := newOAuthApp(t)
	res, err := http.Get(a.base + "/oauth/upstream-client.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var doc struct {
		ClientID     string   `json:"client_id"`
		RedirectURIs []string `json:"redirect_uris"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
	}
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("%s: %v", res.Status, err)
	}
	if doc.ClientID != a.base+"/oauth/upstream-client.json" || len(doc.RedirectURIs) != 1 ||
		doc.RedirectURIs[0] != a.base+"/admin/connections/callback" || doc.AuthMethod != "none" {
		t.Fatalf("document = %+v", doc)
	}
}

// TestRegisterOAuthUpstreamRefusals: registering an upstream with auth
// through the API discovers it, and says precisely what is wrong: an
// authorization server without S256, an exchange upstream without
// TOOLBELT_OAUTH=oidc, auth on a stdio server. Nothing is stored.
func TestRegisterOAuthUpstreamRefusals(t *testing.T) {
	t.Parallel()
	up := oauthupstream.Start(t, oauthupstream.Options{NoS256: true})
	a := newTestAppWith(t, hostCaps{}, netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"name": "tracker", "transport": "http", "url": up.URL, "category": "api", "auth": map[string]any{"type": "oauth"}}, "does not take PKCE with S256"},
		{map[string]any{"name": "tracker", "transport": "http", "url": up.URL, "category": "api", "auth": map[string]any{"type": "exchange", "audience": up.URL}}, "TOOLBELT_OAUTH=oidc"},
		{map[string]any{"name": "tracker", "transport": "http", "url": up.URL, "category": "api", "auth": map[string]any{"type": "exchange"}}, "/auth/audience"},
		{map[string]any{"name": "tracker", "transport": "stdio", "command": []string{"true"}, "category": "api", "auth": map[string]any{"type": "oauth"}}, "is for http and sse servers"},
		{map[string]any{"name": "tracker", "transport": "http", "url": up.URL, "category": "api", "auth": map[string]any{"type": "oauth", "client_id": "x", "client_secret": "plain-secret-value"}}, "carries a credential"},
	} {
		res := a.do(t, "admin", http.MethodPost, "/api/v1/upstreams", c.body)
		if res.Status != http.StatusUnprocessableEntity || !strings.Contains(string(res.Body), c.want) {
			t.Errorf("%v: %d %s, want 422 saying %q", c.body["auth"], res.Status, res.Body, c.want)
		}
	}
	if res := a.do(t, "admin", http.MethodGet, "/api/v1/upstreams/tracker", nil); res.Status != http.StatusNotFound {
		t.Fatalf("a refused registration was stored: %d", res.Status)
	}
}
