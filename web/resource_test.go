package web_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"toolbelt/services/access"
	"toolbelt/web"
)

// TestProtectedResourceMetadata checks the three forms of RFC 9728
// metadata an MCP client looks for: each names its own resource (the
// client refuses one naming another), the scopes, and answers CORS.
func TestProtectedResourceMetadata(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	pub := ta.app.PublicURL
	if !strings.HasPrefix(pub, "http://127.0.0.1:") {
		t.Fatalf("public URL %q: want the listen address", pub)
	}
	for suffix, resource := range map[string]string{"": pub, "/mcp": pub + "/mcp", "/api/v1": pub + "/api/v1"} {
		r := ta.do(t, "none", http.MethodGet, web.ResourceMetadataPath+suffix, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", suffix, r.Status, r.Body)
		}
		var m oauthex.ProtectedResourceMetadata
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatal(err)
		}
		if m.Resource != resource {
			t.Errorf("%s: resource %q; want %q", suffix, m.Resource, resource)
		}
		if !slices.Equal(m.ScopesSupported, access.Scopes) || !slices.Equal(m.BearerMethodsSupported, []string{"header"}) {
			t.Errorf("%s: scopes %v, bearer methods %v", suffix, m.ScopesSupported, m.BearerMethodsSupported)
		}
		if got := r.Header.Get("Access-Control-Allow-Origin"); got != "*" {
			t.Errorf("%s: CORS %q", suffix, got)
		}
	}
	if r := ta.do(t, "none", http.MethodGet, web.ResourceMetadataPath+"/other", nil); r.Status != http.StatusNotFound {
		t.Errorf("metadata of an unknown resource: %d", r.Status)
	}
}

// TestBearerChallenge checks the 401 an MCP client discovers from: it
// points at the resource's own metadata and names the scopes to ask for;
// a wrong token says invalid_token; a key still works beside it.
func TestBearerChallenge(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	pub := ta.app.PublicURL
	for _, tc := range []struct {
		key, path, method, metadata, code string
		scopes                            []string
	}{
		{"", "/mcp", http.MethodPost, pub + "/.well-known/oauth-protected-resource/mcp", "", []string{"tools:read", "tools:call"}},
		{"", "/api/v1/tools", http.MethodGet, pub + "/.well-known/oauth-protected-resource/api/v1", "", nil},
		{"tbat_forged", "/mcp", http.MethodPost, pub + "/.well-known/oauth-protected-resource/mcp", "invalid_token", []string{"tools:read", "tools:call"}},
		{"tb_wrong", "/api/v1/tools", http.MethodGet, pub + "/.well-known/oauth-protected-resource/api/v1", "invalid_token", nil},
	} {
		req, _ := http.NewRequest(tc.method, tc.path, strings.NewReader(`{}`))
		if tc.key != "" {
			req.Header.Set("Authorization", "Bearer "+tc.key)
		}
		r := ta.send(t, req)
		if r.Status != http.StatusUnauthorized {
			t.Fatalf("%s %s with %q: %d %s", tc.method, tc.path, tc.key, r.Status, r.Body)
		}
		cs, err := oauthex.ParseWWWAuthenticate(r.Header.Values("WWW-Authenticate"))
		if err != nil || len(cs) != 1 || !strings.EqualFold(cs[0].Scheme, "bearer") {
			t.Fatalf("%s: challenge %q: %v", tc.path, r.Header.Values("WWW-Authenticate"), err)
		}
		p := cs[0].Params
		if p["resource_metadata"] != tc.metadata || p["error"] != tc.code || p["scope"] != strings.Join(tc.scopes, " ") {
			t.Errorf("%s with %q: challenge %v", tc.path, tc.key, p)
		}
	}
	if r := ta.do(t, "agent", http.MethodGet, "/api/v1/tools", nil); r.Status != http.StatusOK {
		t.Errorf("a key beside the challenge: %d %s", r.Status, r.Body)
	}
}

// TestScopesFollowRoles checks the route table's scopes: every route's
// scope is one each of its roles may hold, so a token of any principal
// allowed a route can carry what it needs, and none opens more.
func TestScopesFollowRoles(t *testing.T) {
	t.Parallel()
	roles := web.RolePolicies()
	for scope, routes := range web.ScopePolicies() {
		if !slices.Contains(access.Scopes, scope) {
			t.Errorf("unknown scope %q", scope)
		}
		for _, r := range routes {
			for role, allowed := range roles {
				if slices.Contains(allowed, r) && !slices.Contains(access.RoleScopes(role), scope) {
					t.Errorf("%s %s needs %s, which role %s, allowed it, cannot hold", r.Method, r.Path, scope, role)
				}
			}
		}
	}
}

// send serves req through the router and records the answer.
func (a *testApp) send(t testing.TB, req *http.Request) response {
	t.Helper()
	rec := newRecorder()
	a.handler.ServeHTTP(rec, req)
	return response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
}
