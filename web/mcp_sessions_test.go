package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/internal/nodetest"
	"toolbelt/services/access"
	"toolbelt/web"
)

// sessionsReport is what testdata/node/mcp-sessions.mjs found.
type sessionsReport struct {
	Sessions []string `json:"sessions"`
	Errors   []string `json:"errors"`
}

// tsSessions opens n sessions as the agent with the TypeScript SDK, each
// left open by close().
func tsSessions(t *testing.T, n int) sessionsReport {
	t.Helper()
	var r sessionsReport
	out := nodetest.Run(t, nil, "mcp-sessions.mjs", fmt.Sprint(n))
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	return r
}

// mcpPing sends a ping in session id with key and returns the status.
func mcpPing(t *testing.T, srv *httptest.Server, key, id string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL+web.MCPPath, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("MCP-Protocol-Version", sessionsVersion)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// mcpStream opens session id's event stream (the GET) and holds it open
// until the test ends.
func mcpStream(t *testing.T, srv *httptest.Server, key, id string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+web.MCPPath, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("MCP-Protocol-Version", sessionsVersion)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("event stream of %s: %d", id, resp.StatusCode)
	}
}

// TestMCPSessionCapEvictsIdle: an agent whose MCP client closes without
// ending its sessions (the TypeScript SDK's close()) opens them past its
// cap. Each new one is admitted, and the agent's least recently used idle
// session is closed (404 next, so a client initializes again); its busy
// sessions (an open event stream, a call waiting for a reviewer) and
// another principal's idle one stay. Only when every session is busy is
// the new one refused 429.
func TestMCPSessionCapEvictsIdle(t *testing.T) {
	a := newTestApp(t)
	dangerousWrite(t, a)
	srv := httptest.NewServer(a.handler)
	t.Cleanup(srv.Close)
	t.Setenv("TOOLBELT_MCP_URL", srv.URL+web.MCPPath)
	t.Setenv("TOOLBELT_AGENT_KEY", a.keys["agent"])
	limit := access.DefaultPrincipalCaps().MCPSessions
	quiet := func(role string) *mcp.ClientSession { // a session without an event stream
		t.Helper()
		client := mcp.NewClient(&mcp.Implementation{Name: "toolbelt-test", Version: "1.0.0"}, nil)
		cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL + web.MCPPath, MaxRetries: -1,
			HTTPClient:           &http.Client{Transport: bearer{key: a.keys[role], next: http.DefaultTransport}},
			DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: sessionsVersion})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}

	// The admin's idle session, opened first: the least recently used of all.
	admin := quiet("admin")
	// The agent's busy sessions: one holds its event stream open (the Go
	// SDK opens it before Connect returns), one made a call that waits for
	// a reviewer.
	streaming, err := mcpConnectSession(t, a, srv, "agent")
	if err != nil {
		t.Fatal(err)
	}
	parked := quiet("agent")
	res := mcpCall(t, parked, "overwrite_note", map[string]any{"path": "n.txt", "content": "x"})
	approvalID, _ := res.Meta["toolbelt/approval_id"].(string)
	if !res.IsError || res.Meta["toolbelt/status"] != "awaiting_approval" || approvalID == "" {
		t.Fatalf("parked call: %v %v", res.IsError, res.Meta)
	}

	// The flood: the TypeScript client opens three sessions past the cap.
	flood := tsSessions(t, limit-2+3)
	if len(flood.Errors) > 0 || len(flood.Sessions) != limit+1 {
		t.Fatalf("sessions past the cap refused: %d opened, errors %v", len(flood.Sessions), flood.Errors)
	}
	for i, id := range flood.Sessions {
		want := 200
		if i < 3 {
			want = 404
		}
		if got := mcpPing(t, srv, a.keys["agent"], id); got != want {
			t.Errorf("session %d of the flood: ping %d, want %d", i, got, want)
		}
	}
	for name, cs := range map[string]*mcp.ClientSession{"streaming": streaming, "parked": parked, "admin's": admin} {
		if err := cs.Ping(t.Context(), nil); err != nil {
			t.Errorf("the %s session was evicted: %v", name, err)
		}
	}

	// Every session busy: the next is refused.
	for _, id := range flood.Sessions[3:] {
		mcpStream(t, srv, a.keys["agent"], id)
	}
	if r := tsSessions(t, 1); len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "RATE_LIMIT_EXCEEDED") {
		t.Fatalf("a session past a cap of busy ones: %+v", r)
	}
	// The reviewer decides: the parked session is idle, and makes room.
	if r := a.do(t, "reviewer", "POST", "/api/v1/approvals/"+approvalID+"/deny", map[string]any{"reason": "flood"}); r.Status != 200 {
		t.Fatalf("deny: %d %s", r.Status, r.Body)
	}
	if r := tsSessions(t, 1); len(r.Errors) != 0 {
		t.Fatalf("a session once one was idle: %+v", r)
	}
	if err := parked.Ping(t.Context(), nil); err == nil {
		t.Error("the session idle since its call was decided is still open")
	}
	if err := streaming.Ping(t.Context(), nil); err != nil {
		t.Errorf("the streaming session was evicted: %v", err)
	}

	metrics := string(a.do(t, "admin", "GET", "/metrics", nil).Body)
	for re, want := range map[string]string{
		`(?m)^toolbelt_mcp_sessions_evicted_total(?:\{[^}]*\})? (\d+)$`:                          "4",
		`(?m)^toolbelt_principal_cap_refusals_total\{[^}]*resource="mcp_sessions"[^}]*\} (\d+)$`: "1",
	} {
		if m := regexp.MustCompile(re).FindStringSubmatch(metrics); m == nil || m[1] != want {
			t.Errorf("%s: %v, want %s\n%s", re, m, want, grepLines(metrics, "mcp_sessions"))
		}
	}
}
