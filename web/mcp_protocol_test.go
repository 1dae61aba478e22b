package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/app"
	"toolbelt/handlers/mcpserver"
	"toolbelt/services/netpolicy"
	"toolbelt/web"
)

// wireTap is a client transport that keeps every response body, so a test
// reads what the server sent and not what a tolerant client made of it.
type wireTap struct {
	next   http.RoundTripper
	mu     sync.Mutex
	bodies []*bytes.Buffer
}

func (w *wireTap) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := w.next.RoundTrip(r)
	if err != nil || res.Body == nil {
		return res, err
	}
	buf := &bytes.Buffer{}
	w.mu.Lock()
	w.bodies = append(w.bodies, buf)
	w.mu.Unlock()
	res.Body = &tappedBody{ReadCloser: res.Body, tap: w, buf: buf}
	return res, nil
}

// wire is every body read so far, one after the other.
func (w *wireTap) wire() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var all strings.Builder
	for _, b := range w.bodies {
		all.WriteString(b.String() + "\n")
	}
	return all.String()
}

type tappedBody struct {
	io.ReadCloser
	tap *wireTap
	buf *bytes.Buffer
}

func (b *tappedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.tap.mu.Lock()
	b.buf.Write(p[:n])
	b.tap.mu.Unlock()
	return n, err
}

// wireResults are the JSON-RPC results in what the server sent (JSON
// bodies and the data lines of event streams), in order. (The stateless
// protocol's requests may share an id.)
func wireResults(t *testing.T, wire string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(wire, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(line, "data:"))
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var msg struct {
			Result map[string]any `json:"result"`
		}
		if json.Unmarshal([]byte(line), &msg) == nil && msg.Result != nil {
			out = append(out, msg.Result)
		}
	}
	return out
}

// TestMCPWireByVersion: what each protocol version requires is on the wire,
// whichever version the client negotiates: under 2026-07-28 (stateless) a
// tools/list says cacheScope private, since the list is the caller's own,
// and every tools/call result says resultType complete; the session
// versions before it carry no resultType. The go-sdk client tolerates both
// omissions, so the test reads the bytes.
func TestMCPWireByVersion(t *testing.T) {
	app := newTestApp(t)
	dangerousWrite(t, app)
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	for _, version := range []string{web.StatelessProtocolVersion, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"} {
		t.Run(version, func(t *testing.T) {
			tap := &wireTap{next: bearer{key: app.keys["agent"], next: http.DefaultTransport}}
			cs, err := mcpDial(t, srv, bearer{next: tap}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("negotiated %s, want %s", got, version)
			}
			mcpTools(t, cs)
			mcpCall(t, cs, "file_list", map[string]any{})                                     // succeeds
			mcpCall(t, cs, "overwrite_note", map[string]any{"path": "w.txt", "content": "x"}) // waits for approval
			mcpCall(t, cs, "file_read", map[string]any{})                                     // refused
			mcpCall(t, cs, mcpserver.SearchToolsName, map[string]any{"query": "list files"})
			mcpCall(t, cs, mcpserver.CallResultName, map[string]any{"call_id": "nope"})

			lists, calls := 0, 0
			for i, res := range wireResults(t, tap.wire()) {
				switch {
				case res["tools"] != nil:
					lists++
					if res["cacheScope"] != "private" {
						t.Errorf("result %d, tools/list: cacheScope %v, want private", i, res["cacheScope"])
					}
				case res["content"] != nil:
					calls++
					want := any(nil)
					if version >= web.StatelessProtocolVersion {
						want = "complete"
					}
					if res["resultType"] != want {
						t.Errorf("result %d, tools/call: resultType %v, want %v (%v)", i, res["resultType"], want, res)
					}
				}
			}
			if lists == 0 || calls != 5 {
				t.Errorf("read %d tools/list and %d tools/call results off the wire, want 1+ and 5", lists, calls)
			}
		})
	}
}

// TestMCPCancelWhileWaiting: a client that gives up on a call held open
// for approval (the SDK sends notifications/cancelled in a session; under
// 2026-07-28 it ends the request) cancels the call: it ends failed with
// CANCELLED, its approval leaves the queue, and a reviewer's late approval
// runs nothing.
func TestMCPCancelWhileWaiting(t *testing.T) {
	app := newTestApp(t)
	dangerousWrite(t, app)
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	for _, version := range []string{"2025-11-25", web.StatelessProtocolVersion} {
		t.Run(version, func(t *testing.T) {
			waiting := make(chan [2]string, 1) // the call and its approval
			client := mcp.NewClient(&mcp.Implementation{Name: "cancel-test", Version: "1.0.0"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					callID, _ := req.Params.Meta["toolbelt/call_id"].(string)
					approvalID, _ := req.Params.Meta["toolbelt/approval_id"].(string)
					if callID != "" && approvalID != "" {
						select {
						case waiting <- [2]string{callID, approvalID}:
						default:
						}
					}
				},
			})
			cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{
				Endpoint:   srv.URL + web.MCPPath,
				HTTPClient: &http.Client{Transport: bearer{key: app.keys["agent"], next: http.DefaultTransport}},
				MaxRetries: -1,
			}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cs.Close() })
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			path := "cancelled-" + version + ".txt"
			params := &mcp.CallToolParams{Name: "overwrite_note", Arguments: map[string]any{"path": path, "content": "must not run"}}
			params.SetProgressToken("cancel-me")
			callErr := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, params)
				callErr <- err
			}()
			var callID, approvalID string
			select {
			case ids := <-waiting:
				callID, approvalID = ids[0], ids[1]
			case err := <-callErr:
				t.Fatalf("the call answered before it was followed: %v", err)
			}
			cancel()
			if err := <-callErr; err == nil {
				t.Fatal("the cancelled call answered without an error")
			}
			rec := app.poll(t, "agent", callID)
			result, _ := rec["result"].(map[string]any)
			errObj, _ := result["error"].(map[string]any)
			if rec["status"] != "failed" || rec["error_code"] != "CANCELLED" || errObj["code"] != "CANCELLED" {
				t.Fatalf("after the client cancelled: %v", rec)
			}
			var queue struct{ Approvals []map[string]any }
			_ = json.Unmarshal(app.do(t, "reviewer", "GET", "/api/v1/approvals", nil).Body, &queue)
			for _, a := range queue.Approvals {
				if a["call_id"] == callID {
					t.Errorf("the cancelled call's approval is still waiting: %v", a)
				}
			}
			if r := app.do(t, "reviewer", "POST", "/api/v1/approvals/"+approvalID+"/approve", map[string]any{"reason": "late"}); r.Status == 200 {
				t.Errorf("a late approval of the cancelled call: %d %s", r.Status, r.Body)
			}
			read := app.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "file_read", "session_id": "principal-" + fmt.Sprint(app.ids["agent"]), "arguments": map[string]any{"path": path}})
			if res := read.JSON(t); res["success"] == true {
				t.Errorf("the cancelled call wrote its file: %v", res)
			}
		})
	}
}

// TestMCPCallResultWaits: call_result with wait_seconds holds its answer
// until a reviewer decides, for a client that sends no progress token.
func TestMCPCallResultWaits(t *testing.T) {
	app := newTestApp(t)
	dangerousWrite(t, app)
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	// sent learns when the call_result that waits has left the client, so
	// the reviewer approves while it waits rather than before.
	sent := make(chan struct{}, 1)
	cs, err := mcpConnectWith(t, srv, bearer{key: app.keys["agent"], next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Header.Get("Mcp-Name") == mcpserver.CallResultName && r.ContentLength > 0 {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if strings.Contains(string(body), fmt.Sprintf(`"wait_seconds":%d`, mcpserver.MaxWaitSeconds)) {
				sent <- struct{}{}
			}
		}
		return http.DefaultTransport.RoundTrip(r)
	})})
	if err != nil {
		t.Fatal(err)
	}
	parked := mcpCall(t, cs, "overwrite_note", map[string]any{"path": "waited.txt", "content": "approved while call_result waited"})
	callID, _ := parked.Meta["toolbelt/call_id"].(string)
	approvalID, _ := parked.Meta["toolbelt/approval_id"].(string)
	if !parked.IsError || callID == "" || approvalID == "" {
		t.Fatalf("parked: %v %v", parked.IsError, parked.Meta)
	}
	if quick := mcpCall(t, cs, mcpserver.CallResultName, map[string]any{"call_id": callID, "wait_seconds": 0}); !quick.IsError ||
		quick.Meta["toolbelt/status"] != "awaiting_approval" {
		t.Fatalf("without a wait: %v %s", quick.IsError, mcpText(t, quick))
	}
	for _, bad := range []any{-1, mcpserver.MaxWaitSeconds + 1, "10"} {
		if res := mcpCall(t, cs, mcpserver.CallResultName, map[string]any{"call_id": callID, "wait_seconds": bad}); !res.IsError ||
			!strings.HasPrefix(mcpText(t, res), "VALIDATION_ERROR: ") || !strings.Contains(mcpText(t, res), "wait_seconds") {
			t.Errorf("wait_seconds %v: %v %s", bad, res.IsError, mcpText(t, res))
		}
	}
	answered := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: mcpserver.CallResultName,
			Arguments: map[string]any{"call_id": callID, "wait_seconds": mcpserver.MaxWaitSeconds}})
		if err != nil {
			t.Errorf("call_result: %v", err)
		}
		answered <- res
	}()
	select {
	case <-sent:
	case res := <-answered:
		t.Fatalf("call_result answered before anyone decided: %+v", res)
	}
	if r := app.do(t, "reviewer", "POST", "/api/v1/approvals/"+approvalID+"/approve", map[string]any{"reason": "fine"}); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	res := <-answered
	if res == nil || res.IsError || res.Meta["toolbelt/status"] != "succeeded" || !strings.Contains(mcpText(t, res), "waited.txt") {
		t.Fatalf("call_result that waited: %+v", res)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestMCPOrigin: a web page may reach /mcp only from a loopback origin or
// one an admin allowed; a page that rebinds its own domain to this server
// (DNS rebinding) is refused before its key is even read, and programs,
// which send no Origin, are not affected.
func TestMCPOrigin(t *testing.T) {
	app := newTestAppWith(t, hostCaps{Python: true, Node: true, Sandbox: true}, netpolicy.Policy{}, func(c *app.Config) {
		c.MCPAllowedOrigins = []string{"https://agents.example.com"}
	})
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"origin-test","version":"1"}}}`
	cases := []struct {
		origin, host string
		key          bool
		want         int
	}{
		{"", "", true, 200},
		{"http://localhost:6274", "", true, 200},
		{"http://127.0.0.1:3000", "", true, 200},
		{"http://[::1]:3000", "", true, 200},
		{"https://agents.example.com", "", true, 200},
		{"HTTPS://Agents.Example.com", "", true, 200},
		{"http://evil.example.com", "evil.example.com", true, 403},
		{"http://evil.example.com:8080", "", true, 403},
		{"https://agents.example.com.evil.example.com", "", true, 403},
		{"http://agents.example.com", "", true, 403}, // another scheme is another origin
		{"null", "", true, 403},
		{"http://localhost.evil.example.com", "", true, 403},
		{"http://evil.example.com", "", false, 403}, // refused before the key is asked for
		{"", "", false, 401},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest("POST", srv.URL+web.MCPPath, strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		if tc.key {
			req.Header.Set("Authorization", "Bearer "+app.keys["agent"])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("Origin %q Host %q key %v: %d, want %d: %s", tc.origin, tc.host, tc.key, res.StatusCode, tc.want, body)
		}
		if tc.want == 403 && !strings.Contains(string(body), "TOOLBELT_MCP_ALLOWED_ORIGINS") {
			t.Errorf("Origin %q: the refusal does not say how to allow it: %s", tc.origin, body)
		}
		// A page of an allowed origin may read the answer; no other may.
		if allow := res.Header.Get("Access-Control-Allow-Origin"); (tc.want == 200 && tc.origin != "" && allow != tc.origin) ||
			((tc.want != 200 || tc.origin == "") && allow != "") {
			t.Errorf("Origin %q: Access-Control-Allow-Origin %q", tc.origin, allow)
		}
	}

	// The browser asks before it sends a key: the preflight of an allowed
	// origin names what a client sends; another origin's is refused.
	for origin, want := range map[string]int{"http://localhost:6274": 204, "https://agents.example.com": 204, "http://evil.example.com": 403} {
		req, _ := http.NewRequest("OPTIONS", srv.URL+web.MCPPath, nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type, mcp-session-id")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		h := res.Header
		if res.StatusCode != want || (want == 204 && (h.Get("Access-Control-Allow-Origin") != origin ||
			!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") || !strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") ||
			!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Mcp-Session-Id"))) || (want != 204 && h.Get("Access-Control-Allow-Origin") != "") {
			t.Errorf("preflight from %s: %d %v", origin, res.StatusCode, h)
		}
	}
}

// TestParseOrigins: TOOLBELT_MCP_ALLOWED_ORIGINS takes origins only.
func TestParseOrigins(t *testing.T) {
	got, err := web.ParseOrigins(" https://A.example.com , http://localhost:8080,,https://b.example.com/ ,https://c.example.com:443, http://d.example.com:80")
	if err != nil || strings.Join(got, " ") != "https://a.example.com http://localhost:8080 https://b.example.com https://c.example.com http://d.example.com" {
		t.Errorf("good list: %v %v", got, err)
	}
	for _, bad := range []string{"*", "null", "example.com", "https://*.example.com", "https://example.com/path", "ftp://example.com", "https://user@example.com", "https://example.com?x=1"} {
		if _, err := web.ParseOrigins(bad); err == nil || !strings.Contains(err.Error(), "scheme://host[:port]") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := app.ParseConfig(nil, func(name string) (string, bool) {
		return "*", name == "TOOLBELT_MCP_ALLOWED_ORIGINS"
	}); err == nil || !strings.Contains(err.Error(), "TOOLBELT_MCP_ALLOWED_ORIGINS") {
		t.Errorf("ParseConfig with a wildcard origin: %v", err)
	}
}

// TestMCPRequestWithoutSession: a request other than initialize without a
// session is refused as the transport says, 400 with JSON-RPC's invalid
// request (the SDK alone answered 200 with an error of code 0); one of the
// stateless protocol, which names its version in _meta, needs no session.
func TestMCPRequestWithoutSession(t *testing.T) {
	app := newTestApp(t)
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	post := func(body string, headers map[string]string) (int, string) {
		req, _ := http.NewRequest("POST", srv.URL+web.MCPPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+app.keys["agent"])
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(raw)
	}
	status, body := post(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, nil)
	var msg struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil || status != 400 || msg.ID != 7 || msg.Error.Code != -32600 ||
		!strings.Contains(msg.Error.Message, "initialize") {
		t.Errorf("tools/list before initialize: %d %s", status, body)
	}
	// ping may come before initialize; the SDK answers it.
	if status, body := post(`{"jsonrpc":"2.0","id":9,"method":"ping"}`, nil); status == 400 && strings.Contains(body, "needs a session") {
		t.Errorf("ping before initialize: %d %s", status, body)
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	status, body = post(`{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{`+meta+`}}`,
		map[string]string{"MCP-Protocol-Version": web.StatelessProtocolVersion, "Mcp-Method": "tools/list"})
	if status != 200 || !strings.Contains(body, `"cacheScope":"private"`) || !strings.Contains(body, `"resultType":"complete"`) {
		t.Errorf("stateless tools/list: %d %.300s", status, body)
	}
}
