package web_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"toolbelt/app"
	"toolbelt/internal/testidp"
	"toolbelt/models"
	"toolbelt/services/identity"
	"toolbelt/services/netpolicy"
	"toolbelt/web"
)

// newOIDCApp is the app with a real OpenID provider as its external
// issuer (reached on loopback because TOOLBELT_OIDC_ALLOW_PRIVATE says
// so), an agent, a reviewer and a person in no mapped group there, and
// clients whose tokens are for /mcp, /api/v1, the whole server, and
// another server.
func newOIDCApp(t testing.TB) (*testApp, *testidp.IDP) {
	t.Helper()
	idp := testidp.Start(t, testidp.Options{Users: []testidp.User{
		{Username: "ada", Password: "pw", Email: "ada@corp.example", Groups: []string{"tb-agents"}},
		{Username: "rex", Password: "pw", Groups: []string{"tb-reviewers"}},
		{Username: "eve", Password: "pw", Groups: []string{"staff"}},
	}})
	ta := newTestAppWith(t, hostCaps{Sandbox: true}, netpolicy.Policy{}, func(c *app.Config) {
		c.OIDC = identity.Settings{Issuer: idp.Issuer,
			Roles:        identity.RoleMap{Reviewer: []string{"tb-reviewers"}, Agent: []string{"tb-agents"}},
			AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	})
	pub := ta.app.PublicURL
	for id, resource := range map[string]string{"mcp": pub + web.MCPPath, "api": pub + "/api/v1", "server": pub,
		"elsewhere": "https://other.example.test/mcp"} {
		idp.AddClient(testidp.Client{ID: id, Resource: resource})
	}
	return ta, idp
}

// TestOIDCTokensAtTheAPI calls /api/v1 with the provider's JWT access
// tokens: the person gets a principal with their group's role, the
// token's scopes limit it, and a token for another resource is refused.
func TestOIDCTokensAtTheAPI(t *testing.T) {
	t.Parallel()
	ta, idp := newOIDCApp(t)
	ta.keys["ada"] = idp.AccessToken(t, "ada", "api", "openid", "tools:read", "tools:call")
	ta.keys["ada-read"] = idp.AccessToken(t, "ada", "api", "tools:read")
	ta.keys["ada-server"] = idp.AccessToken(t, "ada", "server", "tools:read")
	ta.keys["ada-mcp"] = idp.AccessToken(t, "ada", "mcp", "tools:read", "tools:call")
	ta.keys["ada-elsewhere"] = idp.AccessToken(t, "ada", "elsewhere", "tools:read", "tools:call")
	ta.keys["rex"] = idp.AccessToken(t, "rex", "api", "tools:read", "tools:call")
	ta.keys["eve"] = idp.AccessToken(t, "eve", "api", "tools:read")

	if r := ta.do(t, "ada", http.MethodGet, "/api/v1/tools", nil); r.Status != http.StatusOK {
		t.Fatalf("GET /tools with ada's token: %d %s", r.Status, r.Body)
	}
	p, err := ta.store.PrincipalByName(t.Context(), "ada")
	if err != nil || p.Role != "agent" {
		t.Fatalf("ada's principal: %+v, %v", p, err)
	}
	grantFiles(t, ta, p.ID)
	call := map[string]any{"tool": "file_list", "session_id": "oidc", "arguments": map[string]any{}}
	if r := ta.do(t, "ada", http.MethodPost, "/api/v1/calls", call); r.Status != http.StatusOK {
		t.Errorf("POST /calls with tools:call: %d %s", r.Status, r.Body)
	}
	r := ta.do(t, "ada-read", http.MethodPost, "/api/v1/calls", call)
	if r.Status != http.StatusForbidden || !strings.Contains(r.Header.Get("WWW-Authenticate"), `error="insufficient_scope"`) {
		t.Errorf("POST /calls without tools:call: %d %s %v", r.Status, r.Body, r.Header)
	}
	if r := ta.do(t, "ada-server", http.MethodGet, "/api/v1/tools", nil); r.Status != http.StatusOK {
		t.Errorf("a token for the whole server: %d %s", r.Status, r.Body)
	}
	// A reviewer's token asking tools:call holds tools:read only.
	if r := ta.do(t, "rex", http.MethodPost, "/api/v1/calls", call); r.Status != http.StatusForbidden {
		t.Errorf("reviewer calling: %d %s", r.Status, r.Body)
	}
	for _, who := range []string{"ada-mcp", "ada-elsewhere"} {
		r := ta.do(t, who, http.MethodGet, "/api/v1/tools", nil)
		if r.Status != http.StatusUnauthorized || !strings.Contains(r.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("%s at /api/v1: %d %s", who, r.Status, r.Body)
		}
	}
	if r := ta.do(t, "eve", http.MethodGet, "/api/v1/tools", nil); r.Status != http.StatusForbidden {
		t.Errorf("a person in no mapped group: %d %s", r.Status, r.Body)
	}
	if _, err := ta.store.PrincipalByName(t.Context(), "eve"); err == nil {
		t.Error("a person in no mapped group got a principal")
	}
	// An expired token and a forged one are refused like a wrong key.
	ta.keys["expired"] = idp.Sign(t, idp.Claims("ada", ta.app.PublicURL+"/api/v1", -2*time.Minute, "tools:read"))
	ta.keys["forged"] = idp.ForgeWithKey(t, idp.Claims("ada", ta.app.PublicURL+"/api/v1", time.Minute, "tools:read"), "")
	for _, who := range []string{"expired", "forged"} {
		if r := ta.do(t, who, http.MethodGet, "/api/v1/tools", nil); r.Status != http.StatusUnauthorized {
			t.Errorf("%s token: %d %s", who, r.Status, r.Body)
		}
	}
	// Disabled, ada's token is refused at once.
	if r := ta.do(t, "admin", http.MethodPost, "/api/v1/principals/"+itoa(p.ID)+"/disable", nil); r.Status != http.StatusOK {
		t.Fatalf("disable ada: %d %s", r.Status, r.Body)
	}
	if r := ta.do(t, "ada", http.MethodGet, "/api/v1/tools", nil); r.Status != http.StatusUnauthorized {
		t.Errorf("disabled ada's token: %d %s", r.Status, r.Body)
	}
}

// TestOIDCIssuerInMetadata lists the provider as an authorization server
// of both resources, so an MCP client finds where to get a token.
func TestOIDCIssuerInMetadata(t *testing.T) {
	t.Parallel()
	ta, idp := newOIDCApp(t)
	for _, suffix := range []string{"/mcp", "/api/v1"} {
		r := ta.do(t, "none", http.MethodGet, web.ResourceMetadataPath+suffix, nil)
		var m oauthex.ProtectedResourceMetadata
		if err := json.Unmarshal(r.Body, &m); err != nil || !slices.Contains(m.AuthorizationServers, idp.Issuer) {
			t.Errorf("%s: authorization servers %v (%v), want %s among them", suffix, m.AuthorizationServers, err, idp.Issuer)
		}
	}
}

// TestOIDCTokensAtMCP connects the go-sdk client to /mcp with the
// provider's token: it lists and calls tools; without tools:call it lists
// but may not call; a token for /api/v1 does not connect.
func TestOIDCTokensAtMCP(t *testing.T) {
	t.Parallel()
	ta, idp := newOIDCApp(t)
	srv := httptest.NewServer(ta.handler)
	t.Cleanup(srv.Close)
	cs, err := mcpConnectWith(t, srv, bearer{key: idp.AccessToken(t, "ada", "mcp", "tools:read", "tools:call"), next: http.DefaultTransport})
	if err != nil {
		t.Fatal(err)
	}
	// The connection made ada's principal; an agent uses what it is granted.
	p, err := ta.store.PrincipalByName(t.Context(), "ada")
	if err != nil {
		t.Fatal(err)
	}
	grantFiles(t, ta, p.ID)
	if _, ok := mcpTools(t, cs)["file_list"]; !ok {
		t.Fatal("file_list not listed")
	}
	if res := mcpCall(t, cs, "file_list", map[string]any{}); res.IsError {
		t.Errorf("file_list: %s", mcpText(t, res))
	}

	readOnly, err := mcpConnectWith(t, srv, bearer{key: idp.AccessToken(t, "ada", "mcp", "tools:read"), next: http.DefaultTransport})
	if err != nil {
		t.Fatal(err)
	}
	if len(mcpTools(t, readOnly)) == 0 {
		t.Error("a tools:read token lists no tools")
	}
	if _, err := readOnly.CallTool(t.Context(), &mcp.CallToolParams{Name: "file_list", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("tools/call without tools:call: %v, want 403", err)
	}

	if _, err := mcpConnectWith(t, srv, bearer{key: idp.AccessToken(t, "ada", "api", "tools:read", "tools:call"), next: http.DefaultTransport}); err == nil {
		t.Error("a token for /api/v1 connected to /mcp")
	}
}

// grantFiles lets principal id use the filesystem tools, as an admin does
// for a new agent.
func grantFiles(t testing.TB, ta *testApp, id uint) {
	t.Helper()
	if r := ta.do(t, "admin", http.MethodPut, "/api/v1/principals/"+itoa(id)+"/grants", map[string]any{"categories": []string{"filesystem"}}); r.Status != http.StatusOK {
		t.Fatalf("grant: %d %s", r.Status, r.Body)
	}
}

// TestOIDCTokenDecisionNamesThePerson: a reviewer deciding through the
// API with the provider's token is recorded as the person the token
// names, through the door "api sso", in the approval and the audit log.
func TestOIDCTokenDecisionNamesThePerson(t *testing.T) {
	t.Parallel()
	ta, idp := newOIDCApp(t)
	dangerousWrite(t, ta)
	_, approval := dangerousCall(t, ta, "agent", "decided by rex's token")
	ta.keys["rex"] = idp.AccessToken(t, "rex", "api", "tools:read", "approve")
	if r := ta.do(t, "rex", http.MethodPost, "/api/v1/approvals/"+approval+"/approve", map[string]any{"reason": "fine"}); r.Status != http.StatusOK {
		t.Fatalf("approve with rex's token: %d %s", r.Status, r.Body)
	}
	var got map[string]any
	for _, a := range ta.do(t, "admin", http.MethodGet, "/api/v1/approvals?status=all", nil).JSON(t)["approvals"].([]any) {
		if a := a.(map[string]any); a["id"] == approval {
			got = a
		}
	}
	person, _ := got["decider_name"].(string)
	if got["decided_via"] != "api sso" || !strings.HasPrefix(person, "rex, ") || !strings.HasSuffix(person, "subject sub-rex at "+idp.Issuer) {
		t.Fatalf("the approval as the API shows it: %v", got)
	}
	if e := auditEntries(t, ta, models.AuditApprovalApprove)[0]; e["actor"] != "rex" || e["person"] != person || e["via"] != "api" {
		t.Fatalf("the approval's audit entry: %v", e)
	}
}
