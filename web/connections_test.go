package web_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/app"
	"toolbelt/internal/oauthupstream"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/netpolicy"
	"toolbelt/web"
)

// peopleApp is Toolbelt with one OAuth-protected upstream, "people" (the
// TS SDK's auth router and server: whoami answers the name the token was
// issued to), registered by the admin, whose own account ("root") lists
// its tools; alice and bob are agents of their own (a key each) with the
// api category.
type peopleApp struct {
	*oauthApp
	up *oauthupstream.Server
}

func newPeopleApp(t *testing.T) *peopleApp {
	t.Helper()
	up := oauthupstream.Start(t, oauthupstream.Options{})
	a := newOAuthApp(t, func(c *app.Config) {
		c.NetPolicy = netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	})
	for _, name := range []string{"alice", "bob", "carol", "robot"} {
		p, err := a.app.Accounts.CreatePrincipal(context.Background(), access.NewPrincipal{Name: name, Role: access.RoleAgent}, nil)
		if err != nil {
			t.Fatal(err)
		}
		a.keys[name], a.ids[name] = p.Key, p.ID
		if r := a.do(t, "admin", http.MethodPut, fmt.Sprintf("/api/v1/principals/%d/grants", p.ID), map[string]any{"categories": []string{"api"}}); r.Status != http.StatusOK {
			t.Fatalf("grants: %d %s", r.Status, r.Body)
		}
	}
	pa := &peopleApp{oauthApp: a, up: up}
	r := a.do(t, "admin", http.MethodPost, "/api/v1/upstreams", map[string]any{"name": "people", "transport": "http", "url": up.URL,
		"category": "api", "auth": map[string]any{"type": "oauth"}})
	if r.Status != http.StatusCreated {
		t.Fatalf("register the upstream: %d %s", r.Status, r.Body)
	}
	// Nobody connected yet: the server says how its tools get listed.
	if s := a.do(t, "admin", http.MethodGet, "/api/v1/upstreams/people", nil).JSON(t); s["auth_type"] != "oauth" ||
		!strings.Contains(fmt.Sprint(s["unlisted"]), "/admin/connections?connect=people") || s["failing"] != nil {
		t.Fatalf("a server nobody connected: %v", s)
	}
	pa.connect(t, "admin", "root")
	if r := a.do(t, "admin", http.MethodPost, "/api/v1/upstreams/people/sync", nil); r.Status != http.StatusOK {
		t.Fatalf("sync with the admin's account: %d %s", r.Status, r.Body)
	}
	for _, tool := range []string{"whoami", "echo"} {
		if r := a.do(t, "admin", http.MethodPost, "/api/v1/upstreams/people/tools/"+tool+"/accept", nil); r.Status != http.StatusOK {
			t.Fatalf("accept %s: %d %s", tool, r.Status, r.Body)
		}
		if r := a.do(t, "admin", http.MethodPut, "/api/v1/upstreams/people/tools/"+tool, map[string]any{"level": "safe"}); r.Status != http.StatusOK {
			t.Fatalf("level of %s: %d %s", tool, r.Status, r.Body)
		}
	}
	return pa
}

// connect runs role's connect flow without a browser: the console
// session, the redirect to the upstream, its sign-in as user, the
// callback, the page that goes on to finish, and back to Connections.
func (a *peopleApp) connect(t *testing.T, role, user string) *person {
	t.Helper()
	p := a.person(t)
	p.signIn(a.keys[role], "/admin/connections")
	back := a.authorize(t, p, user)
	if got := p.finish(back); got.StatusCode != http.StatusSeeOther || !strings.HasPrefix(got.Header.Get("Location"), "/admin/connections") {
		t.Fatalf("%s's connection did not finish: %s", role, got.Status)
	}
	return p
}

// authorize starts p's flow and signs user in at the upstream; it
// returns where the upstream sends the browser back.
func (a *peopleApp) authorize(t *testing.T, p *person, user string) *url.URL {
	t.Helper()
	res, _ := p.visit(http.MethodGet, "/admin/connections/people/connect", nil)
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), a.up.Origin()) {
		t.Fatalf("connect: %s to %q", res.Status, res.Header.Get("Location"))
	}
	back, err := a.up.SignIn(res.Header.Get("Location"), user)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// finish follows the redirect URI back to /admin/connections/finish, as
// the page the callback answers does.
func (p *person) finish(back *url.URL) *http.Response {
	p.t.Helper()
	res, doc := p.visit(http.MethodGet, back.String(), nil)
	next, _ := doc.Find(`meta[http-equiv="refresh"]`).Attr("content")
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(next, "0;url=/admin/connections/finish?") {
		p.t.Fatalf("callback: %s, goes on to %q", res.Status, next)
	}
	res, _ = p.visit(http.MethodGet, strings.TrimPrefix(next, "0;url="), nil)
	return res
}

// whoami calls people__whoami as role over REST, returning the name the
// upstream answered, or the error.
func (a *peopleApp) whoami(t *testing.T, role string, body map[string]any) (string, map[string]any) {
	t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	if body["tool"] == nil {
		body["tool"] = "people__whoami"
	}
	if body["arguments"] == nil {
		body["arguments"] = map[string]any{}
	}
	_, res := a.call(t, role, body)
	return textOf(res["data"]), res
}

// textOf is the first text block of an upstream tool's result (or of a
// composite's output).
func textOf(d any) string {
	m, _ := d.(map[string]any)
	if out, ok := m["output"]; ok {
		m, _ = out.(map[string]any)
	}
	blocks, _ := m["content"].([]any)
	if len(blocks) == 0 {
		return ""
	}
	text, _ := blocks[0].(map[string]any)["text"].(string)
	return text
}

// wantNotConnected checks a call answered UPSTREAM_NOT_CONNECTED naming
// the page that connects the upstream.
func (a *peopleApp) wantNotConnected(t *testing.T, who string, res map[string]any) {
	t.Helper()
	e, _ := res["error"].(map[string]any)
	want := a.base + "/admin/connections?connect=people"
	if res["status"] != "failed" || e["code"] != models.CodeUpstreamNotConnected || e["connect_url"] != want || !strings.Contains(fmt.Sprint(e["message"]), want) {
		t.Fatalf("%s: want UPSTREAM_NOT_CONNECTED with %s, got %v", who, want, res)
	}
}

// users is who the upstream saw call whoami, in order.
func (a *peopleApp) users() []string {
	var out []string
	for _, c := range a.up.Calls() {
		out = append(out, c.User)
	}
	return out
}

// TestConnectedAccountsActAsEachPerson is the "done when" without
// a browser (TestE2EConnectedAccounts drives the console): alice and bob
// connect their own accounts; each one's agent, over REST and over MCP,
// gets its own name; the upstream saw two identities; the call record
// says as whom it acted; a person without an account, or an agent with
// no person, is refused before anything reaches the upstream, never with
// the admin's token; disconnecting stops that person's calls at once.
func TestConnectedAccountsActAsEachPerson(t *testing.T) {
	t.Parallel()
	a := newPeopleApp(t)
	a.connect(t, "alice", "alice")
	bob := a.connect(t, "bob", "bob")

	for _, who := range []string{"alice", "bob", "alice"} {
		got, res := a.whoami(t, who, nil)
		if got != who {
			t.Fatalf("%s's agent got %q: %v", who, got, res)
		}
		rec := a.do(t, who, http.MethodGet, "/api/v1/calls/"+res["call_id"].(string), nil).JSON(t)
		if acted := fmt.Sprint(rec["acted_as"]); !strings.HasPrefix(acted, who+",") || !strings.Contains(acted, "people") {
			t.Errorf("%s's call record acted_as %q", who, acted)
		}
	}
	cs := connectAs(t, a, "bob", false)
	if res := mcpCallRaw(t, cs, "people__whoami"); res.IsError || textBlock(res) != "bob" {
		t.Fatalf("bob's MCP client got %+v", res)
	}

	// Nobody's account for carol (a person who never connected) or robot
	// (an agent with no person): refused, nothing sent upstream.
	before := len(a.up.Calls())
	for _, who := range []string{"carol", "robot"} {
		_, res := a.whoami(t, who, nil)
		a.wantNotConnected(t, who, res)
	}
	if code, _ := a.call(t, "carol", map[string]any{"tool": "people__whoami", "arguments": map[string]any{}}); code != http.StatusOK {
		t.Errorf("UPSTREAM_NOT_CONNECTED answered %d, want 200 as other tool failures", code)
	}
	if calls := a.up.Calls(); len(calls) != before {
		t.Fatalf("a refused call reached the upstream: %+v", calls[before:])
	}

	// bob disconnects (the console's form): his next call is refused at
	// once, alice's goes on.
	res, doc := bob.visit(http.MethodGet, "/admin/connections", nil)
	csrf, _ := doc.Find(`[data-testid="connection-people"] input[name="_csrf"]`).Attr("value")
	if res.StatusCode != http.StatusOK || csrf == "" {
		t.Fatalf("bob's connections page: %s", res.Status)
	}
	if res, _ := bob.visit(http.MethodPost, "/admin/connections/people/disconnect", url.Values{"_csrf": {csrf}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("disconnect: %s", res.Status)
	}
	_, res2 := a.whoami(t, "bob", nil)
	a.wantNotConnected(t, "bob after disconnecting", res2)
	if r := mcpCallRaw(t, cs, "people__whoami"); !r.IsError || !strings.Contains(textBlock(r), "/admin/connections?connect=people") {
		t.Fatalf("bob's MCP client (no URL elicitation) after disconnecting: %+v", r)
	}
	if got, res := a.whoami(t, "alice", nil); got != "alice" {
		t.Fatalf("alice after bob left: %q %v", got, res)
	}

	// The upstream saw two people, never the admin's account calling.
	seen := a.users()
	slices.Sort(seen)
	if got := slices.Compact(seen); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Fatalf("the upstream saw %v, want alice and bob only", a.users())
	}
	// Connecting and disconnecting are audited, without a token.
	audit := a.do(t, "admin", http.MethodGet, "/api/v1/audit?target=upstream:people&limit=100", nil)
	for _, action := range []string{models.AuditConnectionConnect, models.AuditConnectionDisconnect} {
		if !strings.Contains(string(audit.Body), action) {
			t.Errorf("no %s entry in %s", action, audit.Body)
		}
	}
	// The Servers view counts the people connected: root and alice.
	if s := a.do(t, "admin", http.MethodGet, "/api/v1/upstreams/people", nil).JSON(t); s["people_connected"] != float64(2) {
		t.Errorf("people_connected = %v", s["people_connected"])
	}
	// Each person lists their own connections, and removes them over REST.
	if r := a.do(t, "alice", http.MethodGet, "/api/v1/me/connections", nil); !strings.Contains(string(r.Body), `"connected":true`) {
		t.Errorf("alice's connections: %s", r.Body)
	}
	if r := a.do(t, "bob", http.MethodGet, "/api/v1/me/connections", nil); strings.Contains(string(r.Body), `"connected":true`) {
		t.Errorf("bob's connections after disconnecting: %s", r.Body)
	}
	if r := a.do(t, "alice", http.MethodDelete, "/api/v1/me/connections/people", nil); r.Status != http.StatusNoContent {
		t.Fatalf("alice disconnects over REST: %d %s", r.Status, r.Body)
	}
	_, res3 := a.whoami(t, "alice", nil)
	a.wantNotConnected(t, "alice after disconnecting", res3)
	if r := a.do(t, "alice", http.MethodDelete, "/api/v1/me/connections/people", nil); r.Status != http.StatusNotFound {
		t.Errorf("disconnecting twice: %d %s", r.Status, r.Body)
	}
	// Each disconnect (bob's in the console, alice's over REST) and each
	// connect is audited as its person's.
	entries := a.do(t, "admin", http.MethodGet, "/api/v1/audit?target=upstream:people&limit=100", nil).JSON(t)["entries"].([]any)
	did := map[string]bool{}
	for _, e := range entries {
		m := e.(map[string]any)
		did[fmt.Sprint(m["action"], " by ", m["actor"])] = true
	}
	for _, want := range []string{"connection.connect by alice", "connection.connect by bob", "connection.disconnect by bob", "connection.disconnect by alice"} {
		if !did[want] {
			t.Errorf("no audit entry %s: %v", want, did)
		}
	}
}

// TestURLElicitationForConnect: an MCP client that declared URL mode
// elicitation (MCP 2025-11-25) gets URLElicitationRequired (-32042) with
// the console page to open; the go-sdk client hands it to its
// elicitation handler. One without the capability reads the tool error.
func TestURLElicitationForConnect(t *testing.T) {
	t.Parallel()
	a := newPeopleApp(t)
	cs := connectAs(t, a, "carol", true)
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "people__whoami", Arguments: map[string]any{}})
	var rpc *jsonrpc.Error
	if !errors.As(err, &rpc) || rpc.Code != mcp.CodeURLElicitationRequired || !strings.Contains(rpc.Message, models.CodeUpstreamNotConnected) {
		t.Fatalf("want -32042, got %v", err)
	}
	want := a.base + "/admin/connections?connect=people"
	if !strings.Contains(string(rpc.Data), `"mode":"url"`) || !strings.Contains(string(rpc.Data), want) || !strings.Contains(string(rpc.Data), `"elicitationId"`) {
		t.Fatalf("elicitation data %s", rpc.Data)
	}
	plain := connectAs(t, a, "carol", false)
	if r := mcpCallRaw(t, plain, "people__whoami"); !r.IsError || !strings.Contains(textBlock(r), want) || !strings.Contains(textBlock(r), models.CodeUpstreamNotConnected) {
		t.Fatalf("a client without URL elicitation: %+v", r)
	}
	// Once carol connects, the same session's call works.
	a.connect(t, "carol", "carol")
	if r := mcpCallRaw(t, cs, "people__whoami"); r.IsError || textBlock(r) != "carol" {
		t.Fatalf("after connecting: %+v", r)
	}
}

// TestNoOneUsesAnothersConnection makes the attacks: bob's agent naming
// alice's session, naming alice's principal in its arguments and
// headers, calling the upstream tool through a composite, and calling a
// cacheable composite alice just called; each acts as bob (or is
// refused as not connected for carol), never as alice.
func TestNoOneUsesAnothersConnection(t *testing.T) {
	t.Parallel()
	a := newPeopleApp(t)
	a.connect(t, "alice", "alice")
	a.connect(t, "bob", "bob")
	_, res := a.whoami(t, "alice", map[string]any{"session_id": "alice-work"})
	if textOf(res["data"]) != "alice" {
		t.Fatalf("alice: %v", res)
	}
	alice := fmt.Sprint(a.ids["alice"])

	// By session: bob names alice's session.
	if got, res := a.whoami(t, "bob", map[string]any{"session_id": "alice-work"}); got != "bob" {
		t.Fatalf("bob in alice's session got %q: %v", got, res)
	}
	// By principal id: in the arguments (refused as not the tool's) and
	// in headers (ignored).
	_, res = a.whoami(t, "bob", map[string]any{"arguments": map[string]any{"principal_id": a.ids["alice"], "as": "alice"}})
	if res["status"] == "succeeded" && textOf(res["data"]) != "bob" {
		t.Fatalf("bob naming alice in the arguments got %v", res)
	}
	req := httptest.NewRequest(http.MethodPost, "/api/v1/calls", strings.NewReader(`{"tool":"people__whoami","arguments":{}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+a.keys["bob"])
	for _, h := range []string{"X-Principal-Id", "X-Toolbelt-Principal", "X-On-Behalf-Of", "X-Forwarded-User", "X-Act-As"} {
		req.Header.Set(h, alice)
	}
	rec := httptest.NewRecorder()
	a.handler.ServeHTTP(rec, req)
	if !strings.Contains(rec.Body.String(), `"text":"bob"`) {
		t.Fatalf("bob with headers naming alice: %s", rec.Body)
	}
	// Over MCP, with _meta naming alice.
	cs := connectAs(t, a, "bob", false)
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "people__whoami", Arguments: map[string]any{},
		Meta: mcp.Meta{"toolbelt/principal": alice, "principal_id": alice, "toolbelt/session_id": "alice-work"}})
	if err != nil || r.IsError || textBlock(r) != "bob" {
		t.Fatalf("bob's MCP call naming alice: %+v %v", r, err)
	}

	// Through a composite, cacheable: alice's cached result never answers
	// bob, and carol is refused with the URL.
	comp := map[string]any{"name": "who_is_calling", "version": "1.0.0", "category": "api",
		"description": "Say who the upstream thinks is calling. Input: nothing. Output: the upstream's answer.",
		"tags":        []any{"identity"}, "examples": []any{"who am I at people"},
		"parameters": map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false},
		"security":   map[string]any{"level": "safe"},
		"execution":  map[string]any{"timeout": 20000, "cacheable": true, "cacheTTL": 600000},
		"runner":     map[string]any{"kind": "composite", "steps": []any{map[string]any{"tool": "people__whoami", "arguments": map[string]any{}}}}}
	if r := a.do(t, "admin", http.MethodPost, "/api/v1/tools", comp); r.Status != http.StatusCreated {
		t.Fatalf("register the composite: %d %s", r.Status, r.Body)
	}
	for _, who := range []string{"alice", "bob", "alice", "bob"} {
		got, res := a.whoami(t, who, map[string]any{"tool": "who_is_calling", "session_id": "shared"})
		if got != who {
			t.Fatalf("%s through the composite got %q: %v", who, got, res)
		}
	}
	_, res = a.whoami(t, "carol", map[string]any{"tool": "who_is_calling", "session_id": "shared"})
	a.wantNotConnected(t, "carol through the composite", res)

	for _, c := range a.up.Calls() {
		if c.User != "alice" && c.User != "bob" {
			t.Fatalf("the upstream saw %q call", c.User)
		}
	}
}

// TestConnectFlowRefusals: the callback's failures are said clearly on
// the Connections page and connect nothing: a state replayed, a state
// finished in another person's session, the person denying at the
// upstream, and a callback with no session.
func TestConnectFlowRefusals(t *testing.T) {
	t.Parallel()
	a := newPeopleApp(t)
	alice := a.person(t)
	alice.signIn(a.keys["alice"], "/admin/connections")
	back := a.authorize(t, alice, "alice")

	// Bob's session finishing alice's flow (a link sent to him).
	bob := a.person(t)
	bob.signIn(a.keys["bob"], "/admin/connections")
	if res := bob.finish(back); res.StatusCode == http.StatusSeeOther {
		t.Fatal("bob's session finished alice's connection")
	}
	if got, _ := a.whoami(t, "bob", nil); got != "" {
		t.Fatalf("bob is connected as %q", got)
	}
	// Alice finishes; the same state again is refused.
	if res := alice.finish(back); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("alice's own flow: %s", res.Status)
	}
	res := alice.finish(back)
	if res.StatusCode == http.StatusSeeOther {
		t.Fatal("a replayed state was accepted")
	}
	_, doc := alice.visit(http.MethodGet, "/admin/connections/finish?"+back.RawQuery, nil)
	if msg := doc.Find(`[data-testid="alert"]`).Text(); !strings.Contains(msg, "already finished") {
		t.Errorf("replayed state says %q", msg)
	}
	// Denied at the upstream.
	_, doc = alice.visit(http.MethodGet, "/admin/connections/finish?error=access_denied&state=x", nil)
	if msg := doc.Find(`[data-testid="alert"]`).Text(); !strings.Contains(msg, "denied") {
		t.Errorf("denied says %q", msg)
	}
	if got, _ := a.whoami(t, "alice", nil); got != "alice" {
		t.Fatalf("alice after the refusals: %q", got)
	}
}

// connectAs opens an MCP session as role; withURL declares URL mode
// elicitation (its handler accepts, as a host opening the page would).
func connectAs(t *testing.T, a *peopleApp, role string, withURL bool) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts := &mcp.ClientOptions{}
	if withURL {
		opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
		opts.ElicitationHandler = func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept"}, nil
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "agent-of-" + role, Version: "1"}, opts)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.base + web.MCPPath,
		HTTPClient: &http.Client{Transport: bearer{key: a.keys[role], next: http.DefaultTransport}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func mcpCallRaw(t *testing.T, cs *mcp.ClientSession, tool string) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	return r
}

func textBlock(r *mcp.CallToolResult) string {
	if len(r.Content) == 0 {
		return ""
	}
	if tc, ok := r.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}
