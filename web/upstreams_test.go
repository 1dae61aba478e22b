package web_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/internal/nodetest"
	"toolbelt/internal/poll"
	"toolbelt/services/netpolicy"
	"toolbelt/web"
)

// TestUpstreamOverHTTP puts the reference MCP server,
// @modelcontextprotocol/server-everything, behind the running server over
// Streamable HTTP: an admin adds it, its tools are retrieved for an agent's
// task and called through the whole chain (grants, validation against the
// pinned schema, the history), an admin's level makes one wait for a
// reviewer, and bad registrations get clear answers.
func TestUpstreamOverHTTP(t *testing.T) {
	srv := nodetest.StartServer(t, "upstream-server.mjs", "streamableHttp")
	app := newTestAppWith(t, hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true},
		netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})

	r := app.do(t, "admin", "POST", "/api/v1/upstreams", map[string]any{"name": "everything", "transport": "http", "url": srv.URL, "category": "api"})
	if r.Status != 201 {
		t.Fatalf("add: %d %s", r.Status, r.Body)
	}
	added := r.JSON(t)
	accepted := toStrings(added["report"].(map[string]any)["accepted"])
	if !slices.Contains(accepted, "everything__echo") || !slices.Contains(accepted, "everything__get_sum") {
		t.Fatalf("accepted: %v", accepted)
	}
	if r := app.do(t, "admin", "GET", "/api/v1/tools/everything__echo", nil); r.Status != 200 ||
		!strings.Contains(string(r.Body), `"kind":"mcp"`) || !strings.Contains(string(r.Body), `"level":"safe"`) {
		t.Fatalf("the echo tool: %d %s", r.Status, r.Body)
	}

	// Retrieved for a task, and called by an agent granted the category.
	app.do(t, "admin", "PUT", "/api/v1/principals/"+itoa(app.ids["agent"])+"/grants", map[string]any{"categories": []string{"api"}})
	names := selectedNames(t, app.do(t, "agent", "POST", "/api/v1/tools/select", map[string]any{"query": "add two numbers together and give me the sum", "limit": 5}))
	if !slices.Contains(names, "everything__get_sum") {
		t.Errorf("selection for a sum: %v", names)
	}
	code, res := app.call(t, "agent", map[string]any{"tool": "everything__get_sum", "arguments": map[string]any{"a": 19, "b": 23}, "session_id": "up"})
	if code != 200 || res["status"] != "succeeded" || !strings.Contains(string(mustJSON(res["data"])), "42") {
		t.Fatalf("get_sum: %d %v", code, res)
	}
	rec := app.poll(t, "agent", res["call_id"].(string))
	if rec["tool"] != "everything__get_sum" || rec["status"] != "succeeded" {
		t.Errorf("the history: %v", rec)
	}
	// Arguments are checked against the pinned schema before anything
	// reaches the server.
	code, res = app.call(t, "agent", map[string]any{"tool": "everything__get_sum", "arguments": map[string]any{"a": "nineteen"}, "session_id": "up"})
	if code != 422 || errCode(res) != "VALIDATION_ERROR" {
		t.Errorf("bad arguments: %d %v", code, res)
	}

	// The admin makes echo dangerous: it waits for a reviewer, then runs.
	if r := app.do(t, "admin", "PUT", "/api/v1/upstreams/everything/tools/echo", map[string]any{"level": "dangerous"}); r.Status != 200 {
		t.Fatalf("override: %d %s", r.Status, r.Body)
	}
	code, res = app.call(t, "agent", map[string]any{"tool": "everything__echo", "arguments": map[string]any{"message": "approved words"}, "session_id": "up"})
	if code != 202 || errCode(res) != "CONFIRMATION_REQUIRED" {
		t.Fatalf("a dangerous upstream tool: %d %v", code, res)
	}
	approval := res["data"].(map[string]any)["approval_id"].(string)
	if r := app.do(t, "reviewer", "POST", "/api/v1/approvals/"+approval+"/approve", map[string]any{"reason": "fine"}); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	if rec := app.poll(t, "agent", res["call_id"].(string)); rec["status"] != "succeeded" || !strings.Contains(string(mustJSON(rec["result"])), "approved words") {
		t.Errorf("the approved call: %v", rec)
	}

	// Through Toolbelt's own /mcp with the go-sdk client: the upstream's
	// progress reaches the client as its request's progress, and a call
	// the client cancels is cancelled upstream and recorded so.
	front := httptest.NewServer(app.handler)
	defer front.Close()
	var progressMu sync.Mutex
	var progress []mcp.ProgressNotificationParams
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			progressMu.Lock()
			defer progressMu.Unlock()
			progress = append(progress, *r.Params)
		}})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: front.URL + web.MCPPath,
		HTTPClient: &http.Client{Transport: bearer{key: app.keys["agent"], next: http.DefaultTransport}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "everything__trigger_long_running_operation",
		Arguments: map[string]any{"duration": 1, "steps": 4}, Meta: mcp.Meta{"progressToken": "p1"}})
	if err != nil || out.IsError || !strings.Contains(string(mustJSON(out.Content)), "Long running operation completed") {
		t.Errorf("through /mcp: %v %v", mustJSON(out), err)
	}
	// The server counts its 4 steps: each reaches the client as it said
	// it, its total with it (the last may reach Toolbelt after the
	// result, and the client may handle one after the result).
	poll.True(t, 20*time.Second, "the upstream's progress steps reach the client", func() bool {
		progressMu.Lock()
		defer progressMu.Unlock()
		return len(progress) >= 3
	})
	progressMu.Lock()
	for i, p := range progress {
		if p.Progress != float64(i+1) || p.Total != 4 || p.ProgressToken != "p1" {
			t.Errorf("progress %d through /mcp: %+v, want %d of 4", i, p, i+1)
		}
	}
	progressMu.Unlock()
	// The upstream's content blocks reach the client as blocks — an image
	// as an image, text as text — and its structured content as such.
	img, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "everything__get_tiny_image", Arguments: map[string]any{}})
	if err != nil || img.IsError || !slices.ContainsFunc(img.Content, func(c mcp.Content) bool {
		i, ok := c.(*mcp.ImageContent)
		return ok && i.MIMEType == "image/png" && len(i.Data) > 0
	}) {
		t.Errorf("an image through /mcp: %s %v", mustJSON(img), err)
	}
	sc, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "everything__get_structured_content", Arguments: map[string]any{"location": "New York"}})
	if err != nil || sc.IsError || len(sc.Content) == 0 || strings.Contains(string(mustJSON(sc.Content)), `structuredContent`) ||
		!strings.Contains(string(mustJSON(sc.StructuredContent)), "temperature") || strings.Contains(string(mustJSON(sc.StructuredContent)), `"content"`) {
		t.Errorf("structured content through /mcp: %s %v", mustJSON(sc), err)
	}
	slow, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	start := time.Now()
	_, err = cs.CallTool(slow, &mcp.CallToolParams{Name: "everything__trigger_long_running_operation", Arguments: map[string]any{"duration": 30, "steps": 30}})
	cancel()
	if err == nil || time.Since(start) > 10*time.Second {
		t.Errorf("a slow call the client cancelled: %v after %v", err, time.Since(start))
	}
	poll.True(t, 20*time.Second, "the cancelled call is recorded cancelled", func() bool {
		r := app.do(t, "agent", "GET", "/api/v1/calls?tool=everything__trigger_long_running_operation", nil)
		return strings.Contains(string(r.Body), `"error_code":"CANCELLED"`)
	})

	// Disabled: its tools refuse; enabled: they run again.
	app.do(t, "admin", "POST", "/api/v1/upstreams/everything/disable", nil)
	if code, res := app.call(t, "agent", map[string]any{"tool": "everything__get_sum", "arguments": map[string]any{"a": 1, "b": 2}, "session_id": "up"}); res["status"] != "failed" || !strings.Contains(string(mustJSON(res)), "is disabled") {
		t.Errorf("a disabled server's tool: %d %v", code, res)
	}
	app.do(t, "admin", "POST", "/api/v1/upstreams/everything/enable", nil)
	if code, res := app.call(t, "agent", map[string]any{"tool": "everything__get_sum", "arguments": map[string]any{"a": 1, "b": 2}, "session_id": "up"}); res["status"] != "succeeded" {
		t.Errorf("enabled again: %d %v", code, res)
	}

	// Bad registrations.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + closed.Addr().String() + "/mcp"
	closed.Close()
	for _, tc := range []struct {
		name string
		body map[string]any
		code int
		want string
	}{
		{"taken name", map[string]any{"name": "everything", "transport": "http", "url": srv.URL, "category": "api"}, 409, "everything"},
		{"unknown transport", map[string]any{"name": "x", "transport": "ftp", "url": srv.URL, "category": "api"}, 422, "/transport"},
		{"bad name", map[string]any{"name": "Bad_Name", "transport": "http", "url": srv.URL, "category": "api"}, 422, "/name"},
		{"a credential in clear", map[string]any{"name": "y", "transport": "http", "url": srv.URL, "category": "api", "headers": map[string]string{"Authorization": "Bearer abc"}}, 422, "{{env.NAME}}"},
		{"nobody listens", map[string]any{"name": "z", "transport": "http", "url": deadURL, "category": "api"}, 422, "connect"},
		{"outbound policy", map[string]any{"name": "w", "transport": "http", "url": "http://169.254.169.254/mcp", "category": "api"}, 422, "policy"},
		{"stdio without a command", map[string]any{"name": "v", "transport": "stdio", "category": "api"}, 422, "/command"},
	} {
		r := app.do(t, "admin", "POST", "/api/v1/upstreams", tc.body)
		if r.Status != tc.code || !strings.Contains(string(r.Body), tc.want) {
			t.Errorf("%s: %d %s", tc.name, r.Status, r.Body)
		}
	}
	list := app.do(t, "admin", "GET", "/api/v1/upstreams", nil)
	if list.Status != 200 || strings.Count(string(list.Body), `"transport"`) != 1 {
		t.Errorf("after the refused registrations, the list: %d %s", list.Status, list.Body)
	}

	// Deleted: its tools are retired.
	if r := app.do(t, "admin", "DELETE", "/api/v1/upstreams/everything", nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if code, res := app.call(t, "agent", map[string]any{"tool": "everything__get_sum", "arguments": map[string]any{"a": 1, "b": 2}, "session_id": "up"}); code != 404 {
		t.Errorf("a deleted server's tool: %d %v", code, res)
	}
}

// TestUpstreamToolAliasAndDisable: through the API an admin renames an
// upstream tool (the old name's callers are told the new one; a name
// another tool has is refused) and disables one tool (its calls are
// refused saying so, it is not selected, the server's other tools run),
// then enables it again. Only admins may.
func TestUpstreamToolAliasAndDisable(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "weather", Version: "1"}, nil)
	for _, name := range []string{"forecast", "tides"} {
		mcp.AddTool(srv, &mcp.Tool{Name: name, Description: "Tell the " + name + " of a city.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *mcp.CallToolRequest, forecastIn) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + ": fine"}}}, nil, nil
			})
	}
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(up.Close) // after the app's cleanup closed its connection to it
	app := newTestAppWith(t, hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true},
		netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	if r := app.do(t, "admin", "POST", "/api/v1/upstreams", map[string]any{"name": "weather", "transport": "http", "url": up.URL, "category": "search"}); r.Status != 201 {
		t.Fatalf("add: %d %s", r.Status, r.Body)
	}
	app.do(t, "admin", "PUT", "/api/v1/principals/"+itoa(app.ids["agent"])+"/grants", map[string]any{"categories": []string{"search"}})
	call := func(tool string) (int, map[string]any) {
		return app.call(t, "agent", map[string]any{"tool": tool, "arguments": map[string]any{"city": "Oslo"}, "session_id": "w"})
	}

	for _, tc := range []struct {
		role, alias string
		code        int
		want        string
	}{
		{"agent", "forecast_now", 403, ""},
		{"admin", "weather__tides", 409, "weather__tides is another tool's"},
		{"admin", "file_read", 409, "another tool's"},
		{"admin", "Forecast Now", 422, "snake_case"},
	} {
		r := app.do(t, tc.role, "PUT", "/api/v1/upstreams/weather/tools/forecast/alias", map[string]any{"alias": tc.alias})
		if r.Status != tc.code || !strings.Contains(string(r.Body), tc.want) {
			t.Errorf("alias %q by %s: %d %s", tc.alias, tc.role, r.Status, r.Body)
		}
	}
	if r := app.do(t, "admin", "PUT", "/api/v1/upstreams/weather/tools/forecast/alias", map[string]any{"alias": "forecast_now"}); r.Status != 200 || !strings.Contains(string(r.Body), `"tool":"forecast_now"`) {
		t.Fatalf("alias: %d %s", r.Status, r.Body)
	}
	if code, res := call("forecast_now"); code != 200 || !strings.Contains(string(mustJSON(res["data"])), "forecast: fine") {
		t.Errorf("the renamed tool: %d %v", code, res)
	}
	if code, res := call("weather__forecast"); code != 404 || !strings.Contains(string(mustJSON(res)), "renamed it forecast_now") {
		t.Errorf("the old name: %d %v", code, res)
	}
	if r := app.do(t, "admin", "GET", "/api/v1/upstreams/weather", nil); !strings.Contains(string(r.Body), `"alias":"forecast_now"`) {
		t.Errorf("the server does not show the alias: %s", r.Body)
	}

	// Disabled: refused saying so, not selected; tides runs.
	if r := app.do(t, "agent", "POST", "/api/v1/upstreams/weather/tools/forecast/disable", nil); r.Status != 403 {
		t.Errorf("an agent disabled a tool: %d", r.Status)
	}
	if r := app.do(t, "admin", "POST", "/api/v1/upstreams/weather/tools/forecast/disable", nil); r.Status != 200 {
		t.Fatalf("disable: %d %s", r.Status, r.Body)
	}
	if code, res := call("forecast_now"); code != 404 || !strings.Contains(string(mustJSON(res)), "an administrator disabled it on its MCP server weather") {
		t.Errorf("a disabled tool's call: %d %v", code, res)
	}
	if names := selectedNames(t, app.do(t, "agent", "POST", "/api/v1/tools/select", map[string]any{"query": "weather forecast of a city", "limit": 5})); slices.Contains(names, "forecast_now") {
		t.Errorf("a disabled tool was selected: %v", names)
	}
	if code, res := call("weather__tides"); code != 200 {
		t.Errorf("the server's other tool: %d %v", code, res)
	}
	if r := app.do(t, "admin", "GET", "/api/v1/upstreams/weather", nil); !strings.Contains(string(r.Body), `"disabled_at"`) {
		t.Errorf("the server does not show the tool disabled: %s", r.Body)
	}
	if r := app.do(t, "admin", "POST", "/api/v1/upstreams/weather/tools/forecast/enable", nil); r.Status != 200 {
		t.Fatalf("enable: %d %s", r.Status, r.Body)
	}
	if code, res := call("forecast_now"); code != 200 {
		t.Errorf("enabled again: %d %v", code, res)
	}
	if r := app.do(t, "admin", "POST", "/api/v1/upstreams/weather/tools/nope/disable", nil); r.Status != 404 {
		t.Errorf("a tool the server never served: %d %s", r.Status, r.Body)
	}
	audit := app.do(t, "admin", "GET", "/api/v1/audit?target=upstream:weather", nil)
	for _, action := range []string{"upstream.alias", "upstream.tool.disable", "upstream.tool.enable"} {
		if !strings.Contains(string(audit.Body), `"action":"`+action+`"`) {
			t.Errorf("%s is not audited: %s", action, audit.Body)
		}
	}
}
