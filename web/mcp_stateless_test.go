package web_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/handlers/mcpserver"
	"toolbelt/models"
	"toolbelt/web"
)

// TestMCPStatelessAsSDK: what mcpserver.ServeStateless answers to a
// stateless tools/call or tools/list is byte for byte what the go-sdk's
// stateless transport answers through the same server (status, content
// type and body; errors, refusals and approvals included), the ids of the
// calls, approvals and selections each made aside; and a request it does
// not answer exactly (progress, another method) is left to the SDK.
func TestMCPStatelessAsSDK(t *testing.T) {
	app := newTestApp(t)
	dangerousWrite(t, app)
	srv := mcpserver.New(mcpserver.Deps{Selector: app.selector, Invoker: app.invoker, Version: "test",
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(srv.Close)
	ctx := context.Background()
	principal := func(role string) *models.Principal {
		p, err := app.store.PrincipalByID(ctx, app.ids[role])
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true, DisableLocalhostProtection: true})
	serve := func(role string, direct bool, body string, header map[string]string) (int, string, string) {
		p := principal(role)
		req := httptest.NewRequest("POST", web.MCPPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", web.StatelessProtocolVersion)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		if direct {
			if !srv.ServeStateless(w, req, p, "") {
				t.Fatalf("ServeStateless left %s to the SDK", body)
			}
		} else {
			req.Header.Set("Authorization", "Bearer "+app.keys[role]) // verified: the principal rides along
			auth.RequireBearerToken(func(context.Context, string, *http.Request) (*auth.TokenInfo, error) {
				return mcpserver.TokenInfo(p, ""), nil
			}, nil)(sdk).ServeHTTP(w, req)
		}
		return w.Code, w.Header().Get("Content-Type"), w.Body.String()
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}`
	call := func(name, args, moreMeta string) (string, map[string]string) {
		return `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `,` + meta + moreMeta + `}}}`,
			map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": name}
	}
	list := func(id, cursor string) (string, map[string]string) {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{` + cursor + meta + `}}}`,
			map[string]string{"Mcp-Method": "tools/list"}
	}
	type request struct {
		name, role string
		body       string
		header     map[string]string
	}
	var cases []request
	add := func(name, role string, body string, header map[string]string) {
		cases = append(cases, request{name, role, body, header})
	}
	b, h := list("1", "")
	add("list as an agent", "agent", b, h)
	add("list as an admin", "admin", b, h)
	add("list as a reviewer", "reviewer", b, h)
	b, h = list(`"page-2"`, `"cursor":"YmVuY2g",`)
	add("list after a cursor, a string id", "admin", b, h)
	b, h = list("2", `"cursor":"!!",`)
	add("list with a bad cursor", "admin", b, h)
	b, h = call("file_list", `{}`, "")
	add("call that succeeds", "agent", b, h)
	b, _ = call("file_write", `{"path":"a.txt","content":"<b>&</b>"}`, "")
	add("call in the header's session, html in the answer", "admin", b, map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "file_write", "Toolbelt-Session": "shared"})
	b, h = call("file_read", `{}`, "")
	add("call refused by validation", "agent", b, h)
	b, h = call("no_such_tool", `{"x":1}`, "")
	add("call of an unknown tool", "agent", b, h)
	b, h = call("overwrite_note", `{"path":"w.txt","content":"x"}`, "")
	add("call waiting for approval", "agent", b, h)
	b, h = call(mcpserver.SearchToolsName, `{"query":"list files"}`, "")
	add("search_tools", "agent", b, h)
	b, h = call(mcpserver.CallResultName, `{"call_id":"nope"}`, "")
	add("call_result of no call", "agent", b, h)
	b, h = call("file_list", `{}`, `,"toolbelt/session_id":5`)
	add("call with a bad session in _meta", "agent", b, h)
	b, h = call("file_list", `null`, `,"toolbelt/session_id":"mine"`)
	add("call with null arguments in its _meta session", "agent", b, h)
	b, h = call("file_read", `{"path":"a.txt"}`, "")
	add("reviewer's call", "reviewer", b, h)

	ids := regexp.MustCompile(`"toolbelt/(call_id|approval_id|selection_id)":"([^"]+)"`)
	normal := func(body string) string {
		for _, m := range ids.FindAllStringSubmatch(body, -1) {
			body = strings.ReplaceAll(body, m[2], "<"+m[1]+">")
		}
		return body
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws, wt, wb := serve(c.role, false, c.body, c.header)
			gs, gt, gb := serve(c.role, true, c.body, c.header)
			if gs != ws || gt != wt || normal(gb) != normal(wb) {
				t.Errorf("ServeStateless answered\n%d %s %s\nthe SDK\n%d %s %s", gs, gt, gb, ws, wt, wb)
			}
			if !strings.Contains(wb, `"jsonrpc":"2.0"`) {
				t.Errorf("not an answer: %s", wb)
			}
		})
	}

	// What it does not answer exactly is the SDK's, the body left whole.
	progress, h := call("file_list", `{}`, `,"progressToken":"p1"`)
	noCaps := strings.Replace(progress, `"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}},`, "", 1)
	ping := `{"jsonrpc":"2.0","id":4,"method":"ping","params":{` + meta + `}}}`
	for _, c := range []struct {
		name, body string
		header     map[string]string
	}{
		{"progress", progress, h},
		{"no capabilities", noCaps, h},
		{"another method", ping, map[string]string{"Mcp-Method": "ping"}},
		{"a method header that differs", progress, map[string]string{"Mcp-Method": "tools/list", "Mcp-Name": "file_list"}},
		{"a batch", "[" + ping + "]", map[string]string{"Mcp-Method": "ping"}},
		{"a field in another case", strings.Replace(ping, `"method"`, `"Method"`, 1), map[string]string{"Mcp-Method": "ping"}},
	} {
		req := httptest.NewRequest("POST", web.MCPPath, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", web.StatelessProtocolVersion)
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		if srv.ServeStateless(httptest.NewRecorder(), req, principal("agent"), "") {
			t.Errorf("%s: answered, want it left to the SDK", c.name)
		}
		if left, _ := io.ReadAll(req.Body); string(left) != c.body {
			t.Errorf("%s: body left %q", c.name, left)
		}
	}
}

// TestMCPStatelessSeesChanges: a request acts on the catalog and the
// grants as they are when it arrives, as an attacker would test it: a
// revoked grant, a retired tool, a new tool and a disabled principal each
// show at the very next request, on the first page and on a page a cursor
// starts (tools/list keeps decoded pages: mcpserver's listCache), and two
// principals asking in turn each get their own list. In both protocol
// versions: stateless, and in a session opened before the changes.
func TestMCPStatelessSeesChanges(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"stateless", "session"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			mcpSeesChanges(t, version == "stateless")
		})
	}
}

func mcpSeesChanges(t *testing.T, stateless bool) {
	app := newTestApp(t)
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	agent, admin := newMCPPeer(t, srv, app.keys["agent"], stateless), newMCPPeer(t, srv, app.keys["admin"], stateless)
	// A cursor is the name the page starts after: "f" starts a page at
	// file_list, "s" at say.
	names := func(p *mcpPeer) map[string]bool {
		t.Helper()
		got := pageNames(t, p, "")
		maps.Copy(got, pageNames(t, p, base64.RawURLEncoding.EncodeToString([]byte("f"))))
		return got
	}
	onPage := func(p *mcpPeer, after, name string) bool {
		t.Helper()
		return pageNames(t, p, base64.RawURLEncoding.EncodeToString([]byte(after)))[name]
	}
	call := func(p *mcpPeer, tool, args string) string {
		t.Helper()
		_, _, raw := p.post(http.DefaultClient, "tools/call", tool, `{"name":"`+tool+`","arguments":`+args+`}`)
		return string(rpcResult(raw))
	}
	grant := func(categories ...string) {
		t.Helper()
		if r := app.do(t, "admin", "PUT", "/api/v1/principals/"+itoa(app.ids["agent"])+"/grants",
			map[string]any{"categories": categories}); r.Status != 200 {
			t.Fatalf("grants: %d %s", r.Status, r.Body)
		}
	}

	grant("filesystem", "shell")
	if got := names(agent); !got["file_list"] || !onPage(agent, "f", "file_list") {
		t.Fatalf("granted filesystem, listed %v", got)
	}
	if got := call(agent, "file_list", `{}`); strings.Contains(got, `"isError":true`) {
		t.Fatalf("granted file_list: %s", got)
	}
	grant("shell") // revoked: filesystem
	if got := names(agent); got["file_list"] || onPage(agent, "f", "file_list") {
		t.Errorf("revoked filesystem, still listed: %v", got)
	}
	if got := call(agent, "file_list", `{}`); !strings.Contains(got, "PERMISSION_DENIED") {
		t.Errorf("revoked file_list, called: %s", got)
	}
	// The admin, asking in between, lists every tool; the agent's list
	// stays its own.
	if got := names(admin); !got["file_list"] || !onPage(admin, "f", "file_list") {
		t.Errorf("admin's list %v", got)
	}
	if got := names(agent); got["file_list"] || onPage(agent, "f", "file_list") {
		t.Errorf("after the admin's list, the agent's holds file_list: %v", got)
	}

	if r := app.do(t, "admin", "POST", "/api/v1/tools", sayTool()); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	if !names(agent)["say"] || !names(admin)["say"] || !onPage(admin, "s", "say") {
		t.Errorf("a tool registered is not listed at the next request")
	}
	if r := app.do(t, "admin", "DELETE", "/api/v1/tools/say", nil); r.Status != 204 {
		t.Fatalf("retire: %d %s", r.Status, r.Body)
	}
	if names(agent)["say"] || names(admin)["say"] || onPage(admin, "s", "say") {
		t.Errorf("a retired tool is still listed")
	}
	if got := call(agent, "say", `{"text":"hi"}`); !strings.Contains(got, `"isError":true`) {
		t.Errorf("a retired tool still runs: %s", got)
	}

	if r := app.do(t, "admin", "POST", "/api/v1/principals/"+itoa(app.ids["agent"])+"/disable", nil); r.Status != 200 {
		t.Fatalf("disable: %d %s", r.Status, r.Body)
	}
	if status, _, raw := agent.post(http.DefaultClient, "tools/list", "", ""); status != 401 {
		t.Errorf("a disabled principal listed: %d %s", status, raw)
	}
	if status, _, raw := agent.post(http.DefaultClient, "tools/call", "file_list", `{"name":"file_list","arguments":{}}`); status != 401 {
		t.Errorf("a disabled principal called: %d %s", status, raw)
	}
}

// pageNames lists the page of tools/list cursor starts ("" the first) as
// p, by name.
func pageNames(t *testing.T, p *mcpPeer, cursor string) map[string]bool {
	t.Helper()
	params := ""
	if cursor != "" {
		params = `{"cursor":"` + cursor + `"}`
	}
	status, _, raw := p.post(http.DefaultClient, "tools/list", "", params)
	var msg struct {
		Result struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(rpcResult(raw), &msg); status != 200 || err != nil {
		t.Fatalf("tools/list: %d %v %s", status, err, raw)
	}
	out := map[string]bool{}
	for _, tool := range msg.Result.Tools {
		out[tool.Name] = true
	}
	return out
}
