package web_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"toolbelt/app"
	"toolbelt/services/access"
	"toolbelt/services/netpolicy"
)

// TestPrincipalCapsHoldAgainstAFlood: one agent floods the reviewers'
// queue, opens MCP sessions and call event streams without end. Past its
// caps each is refused 429 with a clear reason and counted in the
// metrics, while another principal still gets its own, and the agent gets
// one again once it frees one.
func TestPrincipalCapsHoldAgainstAFlood(t *testing.T) {
	caps := access.PrincipalCaps{PendingApprovals: 3, MCPSessions: 2, EventStreams: 2}
	a := newTestAppWith(t, hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true}, netpolicy.Policy{},
		func(c *app.Config) { c.Caps = caps })
	dangerousWrite(t, a)
	srv := httptest.NewServer(a.handler)
	t.Cleanup(srv.Close) // after the streams' cleanups: Close waits for them

	// Pending approvals: the agent's fourth call is refused, the admin's
	// first still waits for a reviewer.
	var waiting []string
	for i := range 8 {
		code, res := a.call(t, "agent", map[string]any{"tool": "overwrite_note", "session_id": "flood", "arguments": map[string]any{"path": "n.txt", "content": "x"}})
		switch {
		case i < caps.PendingApprovals && code == 202:
			waiting = append(waiting, res["data"].(map[string]any)["approval_id"].(string))
		case i >= caps.PendingApprovals && code == 429 && errCode(res) == "RATE_LIMIT_EXCEEDED" &&
			strings.Contains(res["error"].(map[string]any)["message"].(string), "waiting for a reviewer"):
		default:
			t.Fatalf("the agent's call %d: %d %v", i, code, res)
		}
	}
	if code, res := a.call(t, "admin", map[string]any{"tool": "overwrite_note", "session_id": "other", "arguments": map[string]any{"path": "n.txt", "content": "y"}}); code != 202 {
		t.Errorf("the admin's call beside the flood: %d %v", code, res)
	}
	if r := a.do(t, "reviewer", "POST", "/api/v1/approvals/"+waiting[0]+"/deny", map[string]any{"reason": "flood"}); r.Status != 200 {
		t.Fatalf("deny: %d %s", r.Status, r.Body)
	}
	code, res := a.call(t, "agent", map[string]any{"tool": "overwrite_note", "session_id": "flood", "arguments": map[string]any{"path": "n.txt", "content": "z"}})
	if code != 202 {
		t.Errorf("the agent's call once one was decided: %d %v", code, res)
	}
	pending := res["call_id"].(string)

	// MCP sessions.
	var sessions []interface{ Close() error }
	for range caps.MCPSessions {
		cs, err := mcpConnectSession(t, a, srv, "agent")
		if err != nil {
			t.Fatalf("an MCP session within the cap: %v", err)
		}
		sessions = append(sessions, cs)
	}
	if _, err := mcpConnectSession(t, a, srv, "agent"); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Errorf("an MCP session past the cap: %v", err)
	}
	if _, err := mcpConnectSession(t, a, srv, "admin"); err != nil {
		t.Errorf("the admin's MCP session beside them: %v", err)
	}
	if err := sessions[0].Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := mcpConnectSession(t, a, srv, "agent"); err != nil {
		t.Errorf("an MCP session once one closed: %v", err)
	}

	// Event streams on the agent's waiting call.
	stream := func(role string) (int, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/calls/"+pending+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+a.keys[role])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if resp.StatusCode == 200 { // held open: read its first event
			if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { cancel(); resp.Body.Close() })
		return resp.StatusCode, cancel
	}
	var streams []context.CancelFunc
	for range caps.EventStreams {
		code, cancel := stream("agent")
		if code != 200 {
			t.Fatalf("an event stream within the cap: %d", code)
		}
		streams = append(streams, cancel)
	}
	if code, _ := stream("agent"); code != 429 {
		t.Errorf("an event stream past the cap: %d", code)
	}
	if code, _ := stream("admin"); code != 200 {
		t.Errorf("the admin's stream beside them: %d", code)
	}
	streams[0]()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := stream("agent")
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no event stream once one closed: %d", code)
		}
		time.Sleep(10 * time.Millisecond) // the server sees the client go
	}

	metrics := string(a.do(t, "admin", "GET", "/metrics", nil).Body)
	// The streams' count is at least 1: the loop above may be refused
	// again before the server sees the closed stream go.
	for resource, want := range map[string]int{"pending_approvals": 5, "mcp_sessions": 1, "event_streams": 1} {
		re := regexp.MustCompile(`(?m)^toolbelt_principal_cap_refusals_total\{[^}]*resource="` + resource + `"\} (\d+)$`)
		m := re.FindStringSubmatch(metrics)
		if m == nil {
			t.Errorf("no toolbelt_principal_cap_refusals_total of %s", resource)
			continue
		}
		if n, _ := strconv.Atoi(m[1]); n < want || (resource != "event_streams" && n != want) {
			t.Errorf("toolbelt_principal_cap_refusals_total of %s: %d, want %d", resource, n, want)
		}
	}
}
