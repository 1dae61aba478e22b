package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/handlers/mcpserver"
	"toolbelt/web"
)

// bearer adds an API key to every request of the MCP client.
type bearer struct {
	key    string
	next   http.RoundTripper
	header http.Header // more headers on every request
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.key != "" {
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	for k, v := range b.header {
		r.Header[k] = v
	}
	return b.next.RoundTrip(r)
}

// mcpConnect opens an MCP session to srv with the go-sdk client as role.
func mcpConnect(t *testing.T, app *testApp, srv *httptest.Server, role string) (*mcp.ClientSession, error) {
	t.Helper()
	return mcpConnectWith(t, srv, bearer{key: app.keys[role], next: http.DefaultTransport})
}

func mcpConnectWith(t *testing.T, srv *httptest.Server, auth bearer) (*mcp.ClientSession, error) {
	t.Helper()
	return mcpDial(t, srv, auth, nil)
}

// sessionsVersion is the newest MCP version with sessions (the SDK's
// client otherwise speaks the stateless web.StatelessProtocolVersion).
const sessionsVersion = "2025-11-25"

// mcpConnectSession opens an MCP session as role at sessionsVersion, for
// tests of what a session holds (its work directory).
func mcpConnectSession(t *testing.T, app *testApp, srv *httptest.Server, role string) (*mcp.ClientSession, error) {
	t.Helper()
	return mcpDial(t, srv, bearer{key: app.keys[role], next: http.DefaultTransport}, &mcp.ClientSessionOptions{ProtocolVersion: sessionsVersion})
}

func mcpDial(t *testing.T, srv *httptest.Server, auth bearer, opts *mcp.ClientSessionOptions) (*mcp.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "toolbelt-test", Version: "1.0.0"}, nil)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   srv.URL + web.MCPPath,
		HTTPClient: &http.Client{Transport: auth},
		MaxRetries: -1,
	}
	cs, err := client.Connect(ctx, transport, opts)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func mcpTools(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	out := map[string]*mcp.Tool{}
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		out[tool.Name] = tool
	}
	return out
}

func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

func mcpText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("want one content, got %d", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	return tc.Text
}

// TestMCPAuth: /mcp needs a key like the API, and the go-sdk client cannot
// connect without one.
func TestMCPAuth(t *testing.T) {
	app := newTestApp(t)
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)

	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for _, key := range []string{"", "tb_not-a-real-key"} {
		req, _ := http.NewRequest("POST", srv.URL+web.MCPPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("key %q: %d %v, want 401 with WWW-Authenticate", key, resp.StatusCode, resp.Header)
		}
	}
	if _, err := mcpConnect(t, app, srv, "none"); err == nil {
		t.Fatal("the client connected without a key")
	}
	for _, role := range []string{"admin", "reviewer", "agent"} {
		if _, err := mcpConnect(t, app, srv, role); err != nil {
			t.Errorf("%s: %v", role, err)
		}
	}
}

// TestMCPSessionBoundToPrincipal: another key cannot use a session it did
// not open.
func TestMCPSessionBoundToPrincipal(t *testing.T) {
	app := newTestApp(t)
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	post := func(key, session, body string) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+web.MCPPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	init := post(app.keys["agent"], "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	session := init.Header.Get("Mcp-Session-Id")
	if init.StatusCode != 200 || session == "" {
		t.Fatalf("initialize: %d session %q", init.StatusCode, session)
	}
	if r := post(app.keys["admin"], session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); r.StatusCode != http.StatusForbidden {
		t.Errorf("another principal's session: %d, want 403", r.StatusCode)
	}
}

// TestMCPAgent drives the service with the official go-sdk client as an
// agent granted the filesystem category: the list, search, a write and a
// read, a refusal and an approval.
func TestMCPAgent(t *testing.T) {
	app := newTestApp(t)
	dangerousWrite(t, app) // also grants the agent the filesystem category
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	cs, err := mcpConnectSession(t, app, srv, "agent")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("tools/list", func(t *testing.T) {
		tools := mcpTools(t, cs)
		for _, name := range []string{"search_tools", "call_result", "file_read", "file_write", "file_list", "overwrite_note"} {
			if tools[name] == nil {
				t.Errorf("%s missing from %v", name, slices.Sorted(mapsKeys(tools)))
			}
		}
		for _, name := range []string{"shell_exec", "http_request", "web_search", "code_execute", "browser_navigate"} {
			if tools[name] != nil {
				t.Errorf("%s listed, outside the agent's grants", name)
			}
		}
		read := tools["file_read"]
		if read == nil {
			t.FailNow()
		}
		if read.Annotations == nil || !read.Annotations.ReadOnlyHint || read.Annotations.DestructiveHint == nil || *read.Annotations.DestructiveHint {
			t.Errorf("file_read annotations %+v, want readOnlyHint and no destructiveHint", read.Annotations)
		}
		schema, _ := json.Marshal(read.InputSchema)
		if !strings.Contains(string(schema), `"path"`) || read.Description == "" {
			t.Errorf("file_read schema %s, description %q", schema, read.Description)
		}
		// A moderate tool may overwrite: it keeps MCP's default, destructive.
		if a := tools["file_write"].Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
			t.Errorf("file_write (moderate) annotations %+v, want destructiveHint", a)
		}
		if a := tools["overwrite_note"].Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
			t.Errorf("overwrite_note (dangerous) annotations %+v, want destructiveHint", a)
		}
	})

	t.Run("search_tools", func(t *testing.T) {
		res := mcpCall(t, cs, "search_tools", map[string]any{"query": "read a file", "limit": 5})
		if res.IsError {
			t.Fatal(mcpText(t, res))
		}
		var got struct {
			Tools []struct {
				Name, Reason, Description string
				Score                     float64
			}
		}
		if err := json.Unmarshal([]byte(mcpText(t, res)), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Tools) == 0 || got.Tools[0].Name != "file_read" || got.Tools[0].Score <= 0 || got.Tools[0].Reason == "" || got.Tools[0].Description == "" {
			t.Fatalf("search: %+v", got.Tools)
		}
		for _, tool := range got.Tools {
			if tool.Name == "shell_exec" || tool.Name == "web_search" {
				t.Errorf("search offered %s, outside the grants", tool.Name)
			}
		}
		if bad := mcpCall(t, cs, "search_tools", map[string]any{"query": " "}); !bad.IsError || !strings.Contains(mcpText(t, bad), "/query") {
			t.Errorf("empty query: %+v", bad)
		}
	})

	t.Run("write then read", func(t *testing.T) {
		w := mcpCall(t, cs, "file_write", map[string]any{"path": "notes/todo.txt", "content": "ship the MCP endpoint\n"})
		if w.IsError {
			t.Fatal(mcpText(t, w))
		}
		r := mcpCall(t, cs, "file_read", map[string]any{"path": "notes/todo.txt"})
		if r.IsError {
			t.Fatal(mcpText(t, r))
		}
		var data struct{ Content string }
		if err := json.Unmarshal([]byte(mcpText(t, r)), &data); err != nil || data.Content != "ship the MCP endpoint\n" {
			t.Fatalf("read %q (%v)", mcpText(t, r), err)
		}
		if sc, ok := r.StructuredContent.(map[string]any); !ok || sc["content"] != "ship the MCP endpoint\n" {
			t.Errorf("structuredContent %#v", r.StructuredContent)
		}
		id, _ := r.Meta["toolbelt/call_id"].(string)
		rec := app.do(t, "agent", "GET", "/api/v1/calls/"+id, nil).JSON(t)
		if rec["status"] != "succeeded" || !strings.HasPrefix(rec["session_id"].(string), "mcp-") {
			t.Errorf("call record %v", rec)
		}
	})

	t.Run("refused", func(t *testing.T) {
		res := mcpCall(t, cs, "file_read", map[string]any{"path": "../../etc/passwd"})
		text := mcpText(t, res)
		if !res.IsError || !strings.HasPrefix(text, "PATH_NOT_ALLOWED: ") || len(text) < len("PATH_NOT_ALLOWED: ")+20 {
			t.Fatalf("outside the work directory: %v %q", res.IsError, text)
		}
		denied := mcpCall(t, cs, "shell_exec", map[string]any{"command": "id"})
		if !denied.IsError || !strings.HasPrefix(mcpText(t, denied), "PERMISSION_DENIED: ") ||
			!strings.Contains(mcpText(t, denied), "(search_tools)") || strings.Contains(mcpText(t, denied), "/api/v1") {
			t.Errorf("outside the grants: %q", mcpText(t, denied))
		}
		invalid := mcpCall(t, cs, "file_read", map[string]any{})
		if !invalid.IsError || !strings.HasPrefix(mcpText(t, invalid), "VALIDATION_ERROR: ") || !strings.Contains(mcpText(t, invalid), "path") {
			t.Errorf("missing argument: %q", mcpText(t, invalid))
		}
		unknown := mcpCall(t, cs, "read_file", map[string]any{"path": "x"})
		if !unknown.IsError || !strings.HasPrefix(mcpText(t, unknown), "TOOL_NOT_FOUND: ") || !strings.Contains(mcpText(t, unknown), "file_read") {
			t.Errorf("unknown tool: %q", mcpText(t, unknown))
		}
	})

	t.Run("approval", func(t *testing.T) {
		res := mcpCall(t, cs, "overwrite_note", map[string]any{"path": "approved.txt", "content": "reviewed"})
		text := mcpText(t, res)
		callID, _ := res.Meta["toolbelt/call_id"].(string)
		approvalID, _ := res.Meta["toolbelt/approval_id"].(string)
		if !res.IsError || !strings.HasPrefix(text, "CONFIRMATION_REQUIRED: ") || callID == "" || approvalID == "" ||
			!strings.Contains(text, callID) || !strings.Contains(text, "reviewer") ||
			!strings.Contains(text, `Check later with call_result {"call_id": "`+callID+`"} for the result.`) || strings.Contains(text, "/api/v1") {
			t.Fatalf("dangerous call: %v %q %v", res.IsError, text, res.Meta)
		}
		if wait := mcpCall(t, cs, "call_result", map[string]any{"call_id": callID}); !wait.IsError || !strings.Contains(mcpText(t, wait), "waiting") {
			t.Errorf("before approval: %q", mcpText(t, wait))
		}
		if r := app.do(t, "reviewer", "POST", "/api/v1/approvals/"+approvalID+"/approve", map[string]any{"reason": "fine"}); r.Status != 200 {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		if rec := app.poll(t, "agent", callID); rec["status"] != "succeeded" {
			t.Fatalf("after approval: %v", rec)
		}
		done := mcpCall(t, cs, "call_result", map[string]any{"call_id": callID})
		if done.IsError || !strings.Contains(mcpText(t, done), `"approved.txt"`) {
			t.Errorf("call_result after approval: %v %q", done.IsError, mcpText(t, done))
		}
		read := mcpCall(t, cs, "file_read", map[string]any{"path": "approved.txt"})
		if read.IsError || !strings.Contains(mcpText(t, read), "reviewed") {
			t.Errorf("the approved write: %q", mcpText(t, read))
		}
	})
}

// TestMCPRoles: an admin lists the whole catalog; a reviewer calls no tool
// but may search.
func TestMCPRoles(t *testing.T) {
	app := newTestApp(t)
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	admin, err := mcpConnect(t, app, srv, "admin")
	if err != nil {
		t.Fatal(err)
	}
	tools := mcpTools(t, admin)
	for _, name := range []string{"shell_exec", "file_read", "http_request", "search_tools"} {
		if tools[name] == nil {
			t.Errorf("admin: %s missing", name)
		}
	}
	if a := tools["shell_exec"].Annotations; a == nil || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Errorf("shell_exec annotations %+v", a)
	}
	reviewer, err := mcpConnect(t, app, srv, "reviewer")
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(mapsKeys(mcpTools(t, reviewer))); !slices.Equal(got, []string{"call_result", "search_tools"}) {
		t.Errorf("reviewer lists %v", got)
	}
	if res := mcpCall(t, reviewer, "file_list", map[string]any{}); !res.IsError || !strings.HasPrefix(mcpText(t, res), "PERMISSION_DENIED") {
		t.Errorf("reviewer call: %q", mcpText(t, res))
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestMCPPagination: a catalog larger than a page comes in pages the
// client follows, each tool once.
func TestMCPPagination(t *testing.T) {
	app := newTestApp(t)
	const extra = 520
	registerCountTools(t, app, extra, "api")
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	cs, err := mcpConnect(t, app, srv, "admin")
	if err != nil {
		t.Fatal(err)
	}
	first, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.NextCursor == "" || len(first.Tools) != 2+mcpserver.PageSize {
		t.Fatalf("first page: %d tools, cursor %q", len(first.Tools), first.NextCursor)
	}
	tools := mcpTools(t, cs)
	want := extra + 8 + 2 // the registered ones, the built-ins, search_tools and call_result
	if len(tools) != want {
		t.Errorf("listed %d tools, want %d", len(tools), want)
	}
	if _, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Cursor: "%%%"}); err == nil {
		t.Error("a malformed cursor was accepted")
	}
}

// TestMCPBehindProxy: a reverse proxy on the same host forwards with the
// public Host header; every request carries a key, so that is no DNS
// rebinding risk and must not be refused.
func TestMCPBehindProxy(t *testing.T) {
	app := newTestApp(t)
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	req, _ := http.NewRequest("POST", srv.URL+web.MCPPath, strings.NewReader(body))
	req.Host = "toolbelt.example.com"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+app.keys["agent"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize through a proxy: %d", resp.StatusCode)
	}
}

// A client picks its call session with the Toolbelt-Session header (for
// the connection) or _meta (for one call): the files it writes are the
// API's files of that session, for the same principal only.
func TestMCPChosenSession(t *testing.T) {
	app := newTestApp(t)
	dangerousWrite(t, app) // grants the agent the filesystem category
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	cs, err := mcpConnectWith(t, srv, bearer{key: app.keys["agent"], next: http.DefaultTransport,
		header: http.Header{"Toolbelt-Session": {"run-42"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := mcpCall(t, cs, "file_write", map[string]any{"path": "plan.txt", "content": "from mcp"}); r.IsError {
		t.Fatalf("write: %s", mcpText(t, r))
	}
	// The API sees the file in session run-42.
	_, read := app.call(t, "agent", map[string]any{"tool": "file_read", "session_id": "run-42", "arguments": map[string]any{"path": "plan.txt"}})
	if data(read)["content"] != "from mcp" {
		t.Fatalf("the API's run-42 does not hold the MCP file: %v", read)
	}
	// _meta picks another session for one call.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "file_write", Arguments: map[string]any{"path": "other.txt", "content": "x"},
		Meta: mcp.Meta{"toolbelt/session_id": "run-43"}})
	if err != nil || r.IsError {
		t.Fatalf("write with _meta: %v %v", err, r)
	}
	if rec := app.do(t, "agent", "GET", "/api/v1/calls/"+r.Meta["toolbelt/call_id"].(string), nil).JSON(t); rec["session_id"] != "run-43" {
		t.Fatalf("call record session %v, want run-43", rec["session_id"])
	}
	// Another principal naming the same session gets its own directory.
	if _, other := app.call(t, "admin", map[string]any{"tool": "file_read", "session_id": "run-42", "arguments": map[string]any{"path": "plan.txt"}}); other["success"] == true {
		t.Fatalf("another principal read the agent's session: %v", other)
	}
	// A session id that is not one is refused, saying what to send.
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "file_list", Arguments: map[string]any{}, Meta: mcp.Meta{"toolbelt/session_id": "../p1"}})
	if err != nil || !r.IsError || !strings.HasPrefix(mcpText(t, r), "VALIDATION_ERROR: ") || !strings.Contains(mcpText(t, r), "letters, digits") {
		t.Fatalf("a bad session id: %v %v", err, r)
	}
}
