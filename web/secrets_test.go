package web_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/netpolicy"
)

// echoUpstream is an API that answers with the Authorization header it
// got, as a misbehaving or debugging upstream would; seen lists what it
// got, in order.
type echoUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newEchoUpstream(t *testing.T) *echoUpstream {
	e := &echoUpstream{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		e.mu.Lock()
		e.seen = append(e.seen, got)
		e.mu.Unlock()
		w.Header().Set("X-Echo", got)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(mustJSON(map[string]string{"authorization": got}))
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *echoUpstream) last() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.seen) == 0 {
		return ""
	}
	return e.seen[len(e.seen)-1]
}

// addAgent makes an agent principal granted the api category, keyed
// under name.
func addAgent(t *testing.T, ta *testApp, name string) uint {
	t.Helper()
	p, err := ta.app.Accounts.CreatePrincipal(t.Context(), access.NewPrincipal{Name: name, Role: access.RoleAgent}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ta.keys[name], ta.ids[name] = p.Key, p.ID
	if r := ta.do(t, "admin", http.MethodPut, "/api/v1/principals/"+itoa(p.ID)+"/grants", map[string]any{"categories": []string{"api"}}); r.Status != http.StatusOK {
		t.Fatalf("grant: %d %s", r.Status, r.Body)
	}
	return p.ID
}

// TestPersonalSecretsEndToEnd: alice and bob each store their own
// GITHUB_TOKEN through the API and an http tool sends each one's own,
// cached per person (alice's result never answers bob); the value is in
// no answer, stored call, audit entry, export, log line or database
// page; a caller with none gets UPSTREAM_NOT_CONNECTED naming the page
// to store it; disabling alice deletes hers and leaves bob's.
func TestPersonalSecretsEndToEnd(t *testing.T) {
	t.Parallel()
	const aliceValue, bobValue = "ghp_AliceOwnToken0123456789abcdefABCDEF", "ghp_BobOwnToken0123456789abcdefABCDEFGH"
	up := newEchoUpstream(t)
	ta := newTestAppWith(t, hostCaps{Sandbox: true}, netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	addAgent(t, ta, "alice")
	addAgent(t, ta, "bob")
	tool := toolDef("my_issues", func(m map[string]any) {
		m["description"] = "List the issues assigned to the caller. Input: state. Output: the issues."
		m["category"] = "api"
		m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{"state": map[string]any{"type": "string"}}}
		m["security"] = map[string]any{"level": "safe"}
		m["execution"] = map[string]any{"timeout": 5000, "cacheable": true, "cacheTTL": 600000}
		m["runner"] = map[string]any{"kind": "http", "method": "GET", "url": up.URL + "/issues?state={{state}}",
			"headers": map[string]any{"Authorization": "Bearer {{user.secret.GITHUB_TOKEN}}"}}
	})
	if r := ta.do(t, "admin", http.MethodPost, "/api/v1/tools", tool); r.Status != http.StatusCreated {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	call := map[string]any{"tool": "my_issues", "arguments": map[string]any{"state": "open"}, "session_id": "s"}

	// No secret stored: not connected, with the page that stores it.
	code, res := ta.call(t, "alice", call)
	e, _ := res["error"].(map[string]any)
	if code != http.StatusOK || errCode(res) != models.CodeUpstreamNotConnected || e["connect_url"] != ta.app.PublicURL+"/admin/secrets?name=GITHUB_TOKEN" {
		t.Fatalf("alice with no secret: %d %v", code, res)
	}
	if up.last() != "" {
		t.Fatalf("the upstream was called without the secret: %q", up.last())
	}

	// Bad names and values are refused naming the rule; nothing is stored.
	for _, bad := range []struct{ name, body string }{{"github_token", `{"value":"x"}`}, {"GITHUB_TOKEN", `{"value":""}`}, {"GITHUB_TOKEN", `{"value":"a\r\nX-Evil: 1"}`}} {
		if r := ta.do(t, "alice", http.MethodPut, "/api/v1/me/secrets/"+bad.name, bad.body); r.Status/100 != 4 || !strings.Contains(string(r.Body), "secret") && !strings.Contains(string(r.Body), "value") {
			t.Errorf("PUT %s %s: %d %s", bad.name, bad.body, r.Status, r.Body)
		}
	}
	for who, value := range map[string]string{"alice": aliceValue} {
		r := ta.do(t, who, http.MethodPut, "/api/v1/me/secrets/GITHUB_TOKEN", map[string]string{"value": value})
		if r.Status != http.StatusOK || strings.Contains(string(r.Body), value) || r.JSON(t)["name"] != "GITHUB_TOKEN" {
			t.Fatalf("%s stores: %d %s", who, r.Status, r.Body)
		}
	}
	if r := ta.do(t, "alice", http.MethodGet, "/api/v1/me/secrets", nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"name":"GITHUB_TOKEN"`) || strings.Contains(string(r.Body), aliceValue) {
		t.Errorf("alice's list: %d %s", r.Status, r.Body)
	}
	if r := ta.do(t, "bob", http.MethodGet, "/api/v1/me/secrets", nil); r.Status != http.StatusOK || string(r.Body) != `{"secrets":[]}` {
		t.Errorf("bob's list: %d %s", r.Status, r.Body)
	}

	// Alice's call sends hers; the answer holds none of it.
	code, res = ta.call(t, "alice", call)
	if code != http.StatusOK || res["success"] != true {
		t.Fatalf("alice's call: %d %v", code, res)
	}
	aliceCall := res["call_id"].(string)
	if up.last() != "Bearer "+aliceValue {
		t.Errorf("the upstream got %q for alice", up.last())
	}
	// Bob's identical call is not answered from alice's cached result:
	// he has no secret, so he is not connected, and nothing was sent.
	sent := len(up.seen)
	if code, res = ta.call(t, "bob", call); errCode(res) != models.CodeUpstreamNotConnected || len(up.seen) != sent {
		t.Fatalf("bob with no secret, after alice's cached call: %d %v", code, res)
	}
	if r := ta.do(t, "bob", http.MethodPut, "/api/v1/me/secrets/GITHUB_TOKEN", map[string]string{"value": bobValue}); r.Status != http.StatusOK {
		t.Fatalf("bob stores: %d %s", r.Status, r.Body)
	}
	code, res = ta.call(t, "bob", call)
	if code != http.StatusOK || res["success"] != true || res["metadata"].(map[string]any)["cached"] == true || up.last() != "Bearer "+bobValue {
		t.Fatalf("bob's call: %d %v (upstream got %q)", code, res, up.last())
	}
	bobCall := res["call_id"].(string)

	// Nowhere: answers, stored calls, the audit log, exports, the log.
	ta.app.Invoker.Flush()
	var sealed [][]byte
	var creds []models.Credential
	ta.store.DB().Find(&creds)
	for _, c := range creds {
		sealed = append(sealed, c.Sealed)
	}
	if len(sealed) != 2 {
		t.Fatalf("%d credentials stored, want 2", len(sealed))
	}
	plainIn := func(where string, b []byte) {
		t.Helper()
		for _, v := range []string{aliceValue, bobValue, base64.StdEncoding.EncodeToString([]byte(aliceValue))} {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds a secret value", where)
			}
		}
	}
	secretsIn := func(where string, b []byte) {
		t.Helper()
		plainIn(where, b)
		for _, s := range sealed {
			if bytes.Contains(b, s) || bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString(s))) {
				t.Errorf("%s holds sealed bytes", where)
			}
		}
	}
	for who, id := range map[string]string{"alice": aliceCall, "bob": bobCall} {
		r := ta.do(t, who, http.MethodGet, "/api/v1/calls/"+id, nil)
		if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "[REDACTED:") {
			t.Errorf("%s's stored call: %d %s", who, r.Status, r.Body)
		}
		secretsIn(who+"'s stored call", r.Body)
	}
	for _, path := range []string{"/api/v1/calls", "/api/v1/audit", "/api/v1/tools/my_issues", "/api/v1/tools?format=openai", "/api/v1/tools?format=mcp", "/api/v1/upstreams"} {
		r := ta.do(t, "admin", http.MethodGet, path, nil)
		if r.Status != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, r.Status, r.Body)
		}
		secretsIn(path, r.Body)
	}
	audit := string(ta.do(t, "admin", http.MethodGet, "/api/v1/audit?action=secret.set", nil).Body)
	if strings.Count(audit, `"target":"secret:GITHUB_TOKEN"`) != 2 {
		t.Errorf("the audit log's secret.set entries: %s", audit)
	}
	b := signedIn(t, ta, "admin")
	secretsIn("the audit export", []byte(pageHTML(t, b.get("/admin/audit/export"))))
	secretsIn("the server log", []byte(ta.logs.String()))
	if ta.dbURL == "" {
		for _, f := range []string{ta.dbPath, ta.dbPath + "-wal"} {
			raw, err := os.ReadFile(f)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			plainIn(f, raw) // the sealed values are the database's to hold
		}
	}

	// Disabling alice deletes hers at once and leaves bob's.
	if r := ta.do(t, "admin", http.MethodPost, "/api/v1/principals/"+itoa(ta.ids["alice"])+"/disable", nil); r.Status != http.StatusOK {
		t.Fatalf("disable alice: %d %s", r.Status, r.Body)
	}
	if left, _ := ta.store.CredentialsOf(t.Context(), ta.ids["alice"], ""); len(left) != 0 {
		t.Errorf("alice disabled keeps %d credentials", len(left))
	}
	if left, _ := ta.store.CredentialsOf(t.Context(), ta.ids["bob"], ""); len(left) != 1 {
		t.Errorf("bob has %d credentials after alice was disabled", len(left))
	}

	// Bob deletes his: gone, and a second delete is 404.
	if r := ta.do(t, "bob", http.MethodDelete, "/api/v1/me/secrets/GITHUB_TOKEN", nil); r.Status != http.StatusNoContent {
		t.Errorf("bob deletes: %d %s", r.Status, r.Body)
	}
	if r := ta.do(t, "bob", http.MethodDelete, "/api/v1/me/secrets/GITHUB_TOKEN", nil); r.Status != http.StatusNotFound {
		t.Errorf("bob deletes again: %d %s", r.Status, r.Body)
	}
}

// TestSecretsPage: the console page lists the person's own secrets by
// name, prefills the form from ?name=, stores and deletes through CSRF-
// checked forms, never shows a value, and shows nobody else's.
func TestSecretsPage(t *testing.T) {
	t.Parallel()
	const value = "page-secret-value-0123456789"
	ta := newTestApp(t)
	b := signedIn(t, ta, "agent")
	p := b.get("/admin/secrets?name=JIRA_TOKEN")
	if p.Status != http.StatusOK || p.TestID("secret-name").AttrOr("value", "") != "JIRA_TOKEN" || p.TestID("no-secrets").Length() != 1 {
		t.Fatalf("the page: %d\n%s", p.Status, pageHTML(t, p))
	}
	if p := b.post("/admin/secrets", url.Values{"name": {"JIRA_TOKEN"}, "value": {value}, "_csrf": {"forged"}}); p.Status != http.StatusForbidden {
		t.Errorf("a forged CSRF token: %d", p.Status)
	}
	if left, _ := ta.store.CredentialsOf(t.Context(), ta.ids["agent"], ""); len(left) != 0 {
		t.Fatalf("a forged form stored %d secrets", len(left))
	}
	p = b.post("/admin/secrets", url.Values{"name": {"jira"}, "value": {value}})
	if p.Status != http.StatusBadRequest && p.Status != http.StatusUnprocessableEntity || !strings.Contains(p.TestID("alert").Text(), "upper-case letter") {
		t.Errorf("a bad name: %d %q", p.Status, p.TestID("alert").Text())
	}
	p = b.post("/admin/secrets", url.Values{"name": {"JIRA_TOKEN"}, "value": {value}})
	if p.Status != http.StatusOK || p.TestID("secret-JIRA_TOKEN").Length() != 1 || strings.Contains(pageHTML(t, p), value) {
		t.Fatalf("after storing: %d\n%s", p.Status, pageHTML(t, p))
	}
	if other := signedIn(t, ta, "reviewer").get("/admin/secrets"); other.TestID("secret-JIRA_TOKEN").Length() != 0 {
		t.Error("the reviewer sees the agent's secret")
	}
	p = b.post("/admin/secrets/JIRA_TOKEN/delete", url.Values{})
	if p.Status != http.StatusOK || p.TestID("secret-JIRA_TOKEN").Length() != 0 {
		t.Errorf("after deleting: %d\n%s", p.Status, pageHTML(t, p))
	}
}

// pageHTML is a page as the browser got it.
func pageHTML(t *testing.T, p page) string {
	t.Helper()
	h, err := p.Doc.Html()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestWritingSecretsNeedsItsScope: an OAuth token lists the caller's
// secrets with tools:read, but storing or deleting one, or disconnecting
// an account, takes secrets:write; a token that may call tools (an agent
// host) plants nothing and disconnects nothing.
func TestWritingSecretsNeedsItsScope(t *testing.T) {
	t.Parallel()
	ta, idp := newOIDCApp(t)
	ta.keys["host"] = idp.AccessToken(t, "ada", "api", "tools:read", "tools:call")
	ta.keys["owner"] = idp.AccessToken(t, "ada", "api", "tools:read", "secrets:write")
	if r := ta.do(t, "host", http.MethodGet, "/api/v1/me/secrets", nil); r.Status != http.StatusOK {
		t.Errorf("list with tools:read: %d %s", r.Status, r.Body)
	}
	for _, method := range []string{http.MethodPut, http.MethodDelete} {
		r := ta.do(t, "host", method, "/api/v1/me/secrets/GITHUB_TOKEN", map[string]string{"value": "planted-by-the-host-0123"})
		if r.Status != http.StatusForbidden || !strings.Contains(r.Header.Get("WWW-Authenticate"), `scope="secrets:write"`) {
			t.Errorf("%s with tools:call: %d %s %v", method, r.Status, r.Body, r.Header)
		}
	}
	// Nor does it disconnect the person's accounts.
	if r := ta.do(t, "host", http.MethodDelete, "/api/v1/me/connections/tracker", nil); r.Status != http.StatusForbidden ||
		!strings.Contains(r.Header.Get("WWW-Authenticate"), `scope="secrets:write"`) {
		t.Errorf("disconnect with tools:call: %d %s %v", r.Status, r.Body, r.Header)
	}
	if r := ta.do(t, "owner", http.MethodDelete, "/api/v1/me/connections/tracker", nil); r.Status == http.StatusForbidden {
		t.Errorf("disconnect with secrets:write: %d %s", r.Status, r.Body)
	}
	var n int64
	ta.store.DB().Model(&models.Credential{}).Count(&n)
	if n != 0 {
		t.Fatalf("a tools:call token stored %d secrets", n)
	}
	if r := ta.do(t, "owner", http.MethodPut, "/api/v1/me/secrets/GITHUB_TOKEN", map[string]string{"value": "stored-by-ada-0123456789"}); r.Status != http.StatusOK {
		t.Errorf("PUT with secrets:write: %d %s", r.Status, r.Body)
	}
	if r := ta.do(t, "owner", http.MethodDelete, "/api/v1/me/secrets/GITHUB_TOKEN", nil); r.Status != http.StatusNoContent {
		t.Errorf("DELETE with secrets:write: %d %s", r.Status, r.Body)
	}
}
