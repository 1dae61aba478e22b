package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/app"
	"toolbelt/handlers/mcpserver"
	"toolbelt/internal/poll"
	"toolbelt/services/access"
	"toolbelt/services/netpolicy"
	"toolbelt/web"
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
	// Refused until the server sees the client go.
	poll.Until(t, 10*time.Second, "an event stream once one closed", func() (bool, string) {
		code, _ := stream("agent")
		return code == 200, fmt.Sprint(code)
	})

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

// TestHeldCallWaitsCapped: an agent holds call_result waits on /mcp
// without end. They count with its call event streams: past the cap a
// wait is refused with a tool error saying to read the call without
// waiting (and an event stream 429), while another principal's wait
// still works, and the held ones still get their answer.
func TestHeldCallWaitsCapped(t *testing.T) {
	a := newTestApp(t)
	dangerousWrite(t, a)
	srv := httptest.NewServer(a.handler)
	t.Cleanup(srv.Close)
	limit := access.DefaultPrincipalCaps().EventStreams
	agent, err := mcpConnectSession(t, a, srv, "agent")
	if err != nil {
		t.Fatal(err)
	}
	parked := mcpCall(t, agent, "overwrite_note", map[string]any{"path": "n.txt", "content": "x"})
	callID, _ := parked.Meta["toolbelt/call_id"].(string)
	approvalID, _ := parked.Meta["toolbelt/approval_id"].(string)
	if !parked.IsError || callID == "" || approvalID == "" {
		t.Fatalf("parked: %v %v", parked.IsError, parked.Meta)
	}
	// Each wait is a POST of its own, as a client sends concurrent
	// requests (the Go SDK's client sends one at a time).
	var seq atomic.Int64
	wait := func(cs *mcp.ClientSession, key, id string, seconds int) *mcp.CallToolResult {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": seq.Add(1), "method": "tools/call", "params": map[string]any{
			"name": mcpserver.CallResultName, "arguments": map[string]any{"call_id": id, "wait_seconds": seconds}}})
		req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL+web.MCPPath, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("MCP-Protocol-Version", sessionsVersion)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("call_result: %v", err)
			return &mcp.CallToolResult{}
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var msg struct{ Result *mcp.CallToolResult }
		for _, line := range strings.Split(string(raw), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(data), &msg) == nil && msg.Result != nil {
				return msg.Result
			}
		}
		t.Errorf("call_result: %d %s", resp.StatusCode, raw)
		return &mcp.CallToolResult{}
	}
	// One wait more than the cap: one is refused at once, the others wait.
	held := make(chan *mcp.CallToolResult, limit+1)
	for range limit + 1 {
		go func() { held <- wait(agent, a.keys["agent"], callID, mcpserver.MaxWaitSeconds) }()
	}
	if refusal := mcpText(t, <-held); !strings.HasPrefix(refusal, "RATE_LIMIT_EXCEEDED: ") || !strings.Contains(refusal, "without wait_seconds") {
		t.Fatalf("a wait past the cap of %d: %q", limit, refusal)
	}
	if r := a.do(t, "agent", "GET", "/api/v1/calls/"+callID+"/events", nil); r.Status != 429 {
		t.Errorf("an event stream beside the waits: %d %s", r.Status, r.Body)
	}
	if res := wait(agent, a.keys["agent"], callID, 0); res.Meta["toolbelt/status"] != "awaiting_approval" {
		t.Errorf("call_result without waiting beside the waits: %s", mcpText(t, res))
	}
	// Another principal waits on its own call.
	code, res := a.call(t, "admin", map[string]any{"tool": "overwrite_note", "session_id": "other", "arguments": map[string]any{"path": "n.txt", "content": "y"}})
	if code != 202 {
		t.Fatalf("the admin's call: %d %v", code, res)
	}
	admin, err := mcpConnectSession(t, a, srv, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if out := wait(admin, a.keys["admin"], res["call_id"].(string), 1); out.Meta["toolbelt/status"] != "awaiting_approval" {
		t.Errorf("the admin's wait beside the flood: %s", mcpText(t, out))
	}
	if r := a.do(t, "reviewer", "POST", "/api/v1/approvals/"+approvalID+"/approve", map[string]any{"reason": "fine"}); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	answered := 0
	for range limit {
		if out := <-held; out.Meta["toolbelt/status"] == "succeeded" {
			answered++
		}
	}
	if answered != limit {
		t.Errorf("%d of the %d held waits got the call's result", answered, limit)
	}
}
