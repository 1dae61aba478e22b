package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/handlers/mcpserver"
	"toolbelt/internal/nodetest"
	"toolbelt/services/netpolicy"
	"toolbelt/web"
)

// registerCountTools registers n safe HTTP tools in category, for a catalog
// longer than a tools/list page.
func registerCountTools(t *testing.T, app *testApp, n int, category string) {
	t.Helper()
	for i := range n {
		def := toolDef(fmt.Sprintf("count_words_%03d", i), func(m map[string]any) {
			m["runner"] = map[string]any{"kind": "http", "method": "GET", "url": "https://example.com/count"}
			m["security"] = map[string]any{"level": "safe", "network": true}
			m["category"] = category
		})
		if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
			t.Fatalf("register: %d %s", r.Status, r.Body)
		}
	}
}

// catalogNames is, from the REST API, the names of the tools in
// categories, with MCP's own two: what an agent granted those categories
// should list over MCP.
func catalogNames(t *testing.T, app *testApp, categories ...string) []string {
	t.Helper()
	names := []string{mcpserver.SearchToolsName, mcpserver.CallResultName}
	for _, c := range categories {
		var list struct {
			Tools []struct{ Name string }
			Total int
		}
		r := app.do(t, "admin", "GET", "/api/v1/tools?limit=10000&category="+c, nil)
		if err := json.Unmarshal(r.Body, &list); err != nil || r.Status != 200 || len(list.Tools) != list.Total {
			t.Fatalf("list %s: %d %v %s", c, r.Status, err, r.Body)
		}
		for _, tool := range list.Tools {
			names = append(names, tool.Name)
		}
	}
	slices.Sort(names)
	return names
}

// mcpClientApp is the server both clients drive: the agent may call the
// filesystem and api categories, which hold a dangerous tool
// (overwrite_note) and more tools than a tools/list page.
func mcpClientApp(t *testing.T) (*testApp, *httptest.Server, []string) {
	t.Helper()
	app := mcpClientCatalog(t, netpolicy.Policy{})
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	return app, srv, catalogNames(t, app, "filesystem", "api")
}

// mcpClientCatalog is mcpClientApp's server before it listens, its http
// tools reaching what policy allows.
func mcpClientCatalog(t *testing.T, policy netpolicy.Policy) *testApp {
	t.Helper()
	app := newTestAppWith(t, hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true}, policy)
	dangerousWrite(t, app)
	registerCountTools(t, app, mcpserver.PageSize+20, "api")
	grants := map[string]any{"categories": []string{"filesystem", "api"}}
	if r := app.do(t, "admin", "PUT", fmt.Sprintf("/api/v1/principals/%d/grants", app.ids["agent"]), grants); r.Status != 200 {
		t.Fatalf("grants: %d %s", r.Status, r.Body)
	}
	return app
}

// clientCall is one tools/call as a client saw it.
type clientCall struct {
	IsError    bool           `json:"isError"`
	Code       string         `json:"code"`
	Text       string         `json:"text"`
	Structured map[string]any `json:"structured"`
	CallID     string         `json:"call_id"`
	Status     string         `json:"status"`
	ApprovalID string         `json:"approval_id"`
}

// clientProgress is one notifications/progress as a client saw it.
type clientProgress struct {
	Progress float64  `json:"progress"`
	Total    *float64 `json:"total"`
	Message  string   `json:"message"`
	Status   string   `json:"status"`
}

// tsReport is what testdata/node/mcp-client.mjs found.
type tsReport struct {
	SDK             string   `json:"sdk"`
	ClientLatest    string   `json:"client_latest"`
	ClientSupported []string `json:"client_supported"`
	Negotiated      string   `json:"negotiated"`
	Session         bool     `json:"session"`
	Server          struct{ Name, Version string }
	ToolsCapability bool `json:"tools_capability"`
	List            struct {
		Pages     int      `json:"pages"`
		PageSizes []int    `json:"page_sizes"`
		Tools     int      `json:"tools"`
		Distinct  int      `json:"distinct"`
		First     []string `json:"first"`
		Names     []string `json:"names"`
	}
	Search struct {
		IsError bool     `json:"isError"`
		Tools   []string `json:"tools"`
		First   *struct {
			Name, Reason, Description string
			Score                     float64
		}
	}
	Parked struct {
		clientCall
		ApproveStatus int        `json:"approve_status"`
		After         clientCall `json:"after"`
	}
	Followed struct {
		clientCall
		ApproveStatus int              `json:"approve_status"`
		Progress      []clientProgress `json:"progress"`
		Increasing    bool             `json:"increasing"`
	}
	Safe       clientCall `json:"safe"`
	SafeParked clientCall `json:"safe_parked"`
	Refused    clientCall `json:"refused"`
	Denied     clientCall `json:"denied"`
	Messages   struct {
		Messages      int            `json:"messages"`
		Results       map[string]int `json:"results"`
		Notifications map[string]int `json:"notifications"`
	}
	SchemaErrors []json.RawMessage `json:"schema_errors"`
}

// TestMCPTypeScriptClient drives /mcp with the official TypeScript SDK
// (testdata/node/mcp-client.mjs), which parses every message with the
// SDK's schemas: the handshake, a catalog of two pages, search_tools, a
// dangerous call parked then approved, the same call held open with
// progress while a reviewer approves it, a safe call and two refusals.
func TestMCPTypeScriptClient(t *testing.T) {
	app, srv, catalog := mcpClientApp(t)
	t.Setenv("TOOLBELT_MCP_URL", srv.URL+web.MCPPath)
	t.Setenv("TOOLBELT_API_URL", srv.URL)
	t.Setenv("TOOLBELT_AGENT_KEY", app.keys["agent"])
	t.Setenv("TOOLBELT_REVIEWER_KEY", app.keys["reviewer"])
	out := nodetest.Run(t, nil, "mcp-client.mjs")
	var r tsReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	t.Logf("TypeScript SDK %s negotiated %s; %d tools in %d pages %v; %d messages %v %v; progress %+v",
		r.SDK, r.Negotiated, r.List.Tools, r.List.Pages, r.List.PageSizes, r.Messages.Messages, r.Messages.Results, r.Messages.Notifications, r.Followed.Progress)

	if len(r.SchemaErrors) > 0 {
		t.Errorf("messages the SDK's schemas refuse: %s", r.SchemaErrors)
	}
	if r.Negotiated != r.ClientLatest || r.Negotiated == "" || !r.Session || r.Server.Name != "toolbelt" || !r.ToolsCapability {
		t.Errorf("handshake: negotiated %q, the client's latest %q; session %v, server %+v, tools capability %v",
			r.Negotiated, r.ClientLatest, r.Session, r.Server, r.ToolsCapability)
	}

	listed := slices.Sorted(slices.Values(r.List.Names))
	if r.List.Pages != 2 || r.List.PageSizes[0] != 2+mcpserver.PageSize || r.List.Distinct != r.List.Tools ||
		!slices.Equal(listed, catalog) || !slices.Equal(r.List.First, []string{mcpserver.SearchToolsName, mcpserver.CallResultName}) {
		t.Errorf("tools/list: %d tools (%d distinct) in pages %v, first %v; the catalog has %d",
			r.List.Tools, r.List.Distinct, r.List.PageSizes, r.List.First, len(catalog))
	}

	if r.Search.IsError || len(r.Search.Tools) == 0 || r.Search.First == nil || r.Search.First.Name != "file_read" ||
		r.Search.First.Score <= 0 || r.Search.First.Reason == "" || r.Search.First.Description == "" {
		t.Errorf("search_tools: %+v first %+v", r.Search.Tools, r.Search.First)
	}

	p := r.Parked
	if !p.IsError || p.Code != "CONFIRMATION_REQUIRED" || p.Status != "awaiting_approval" || p.ApprovalID == "" || p.ApproveStatus != 200 {
		t.Errorf("dangerous call without progress: %+v", p)
	}
	if p.After.IsError || p.After.Status != "succeeded" || p.After.CallID != p.CallID || p.After.Structured["path"] != "parked.txt" {
		t.Errorf("call_result after approval: %+v", p.After)
	}

	f := r.Followed
	if f.IsError || f.Status != "succeeded" || f.ApproveStatus != 200 || f.Structured["path"] != "followed.txt" {
		t.Errorf("dangerous call followed with progress: %+v", f)
	}
	checkProgress(t, f.Progress)
	if n := r.Messages.Notifications["notifications/progress"]; n != len(f.Progress) {
		t.Errorf("%d progress notifications received, %d reached the call's handler", n, len(f.Progress))
	}

	if r.Safe.IsError || r.Safe.Structured["content"] != "approved while waiting" || r.SafeParked.Structured["content"] != "approved while parked" {
		t.Errorf("safe calls reading the approved writes: %+v %+v", r.Safe, r.SafeParked)
	}
	if !r.Refused.IsError || r.Refused.Code != "PATH_NOT_ALLOWED" || r.Refused.Status != "refused" {
		t.Errorf("path outside the work directory: %+v", r.Refused)
	}
	if !r.Denied.IsError || r.Denied.Code != "PERMISSION_DENIED" || !strings.Contains(r.Denied.Text, mcpserver.SearchToolsName) {
		t.Errorf("tool outside the grants: %+v", r.Denied)
	}
	if r.Messages.Results["initialize"] != 1 || r.Messages.Results["tools/list"] != 2 || r.Messages.Results["tools/call"] < 8 {
		t.Errorf("results received: %v", r.Messages.Results)
	}
}

// checkProgress: a call held open for approval reports it waits, then how
// it ended, progress increasing and the last one complete.
func checkProgress(t *testing.T, ps []clientProgress) {
	t.Helper()
	if len(ps) < 2 || ps[0].Status != "awaiting_approval" || !strings.Contains(ps[0].Message, "reviewer") {
		t.Fatalf("progress: %+v, want waiting for a reviewer first", ps)
	}
	for i := 1; i < len(ps); i++ {
		if ps[i].Progress <= ps[i-1].Progress {
			t.Errorf("progress does not increase: %+v", ps)
		}
	}
	last := ps[len(ps)-1]
	if last.Status != "succeeded" || last.Total == nil || *last.Total != last.Progress {
		t.Errorf("last progress %+v, want succeeded and complete", last)
	}
}

// TestMCPGoClient drives the same steps with the official Go SDK client,
// its typed results decoded by the SDK.
func TestMCPGoClient(t *testing.T) {
	app, srv, catalog := mcpClientApp(t)
	var mu sync.Mutex
	var progress []clientProgress
	waiting := make(chan string, 1) // the approval a held call waits for
	ended := make(chan struct{})    // the last progress arrived
	client := mcp.NewClient(&mcp.Implementation{Name: "toolbelt-go-conformance", Version: "1.0.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			p := req.Params
			status, _ := p.Meta["toolbelt/status"].(string)
			cp := clientProgress{Progress: p.Progress, Message: p.Message, Status: status}
			if p.Total != 0 {
				cp.Total = &p.Total
			}
			mu.Lock()
			progress = append(progress, cp)
			first := len(progress) == 1
			mu.Unlock()
			if id, _ := p.Meta["toolbelt/approval_id"].(string); first && id != "" {
				waiting <- id
			}
			if cp.Total != nil {
				close(ended)
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   srv.URL + web.MCPPath,
		HTTPClient: &http.Client{Transport: bearer{key: app.keys["agent"], next: http.DefaultTransport}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })

	init := cs.InitializeResult()
	t.Logf("Go SDK negotiated %s (supports %v)", init.ProtocolVersion, mcp.SupportedProtocolVersions())
	latest := mcp.SupportedProtocolVersions()[0]
	if init.ProtocolVersion != latest || latest != web.StatelessProtocolVersion || init.ServerInfo == nil || init.ServerInfo.Name != "toolbelt" || init.Capabilities.Tools == nil {
		t.Errorf("handshake: %+v, want %s", init, latest)
	}

	t.Run("tools/list", func(t *testing.T) {
		var names, first []string
		var pages []int
		cursor := ""
		for {
			page, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			pages = append(pages, len(page.Tools))
			for _, tool := range page.Tools {
				if tool.InputSchema == nil || tool.Annotations == nil {
					t.Errorf("%s: schema %v annotations %v", tool.Name, tool.InputSchema, tool.Annotations)
				}
				names = append(names, tool.Name)
			}
			if first == nil {
				first = names[:2]
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if got := slices.Sorted(slices.Values(names)); len(pages) != 2 || pages[0] != 2+mcpserver.PageSize || !slices.Equal(got, catalog) ||
			!slices.Equal(first, []string{mcpserver.SearchToolsName, mcpserver.CallResultName}) {
			t.Errorf("%d tools in pages %v, first %v; the catalog has %d", len(names), pages, first, len(catalog))
		}
	})

	call := func(t *testing.T, params *mcp.CallToolParams) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			t.Fatalf("tools/call %s: %v", params.Name, err)
		}
		return res
	}
	t.Run("search_tools", func(t *testing.T) {
		res := call(t, &mcp.CallToolParams{Name: mcpserver.SearchToolsName, Arguments: map[string]any{"query": "read a file", "limit": 5}})
		var found struct{ Tools []mcpserver.Found }
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &found); err != nil || res.IsError || len(found.Tools) == 0 || found.Tools[0].Name != "file_read" || found.Tools[0].Score <= 0 {
			t.Errorf("search: %v %+v", err, found.Tools)
		}
	})

	t.Run("held for approval with progress", func(t *testing.T) {
		params := &mcp.CallToolParams{Name: "overwrite_note", Arguments: map[string]any{"path": "followed.txt", "content": "approved while waiting"}}
		params.SetProgressToken("approve-me")
		approved := make(chan int, 1)
		go func() {
			select {
			case id := <-waiting:
				approved <- app.do(t, "reviewer", "POST", "/api/v1/approvals/"+id+"/approve", map[string]any{"reason": "checked by the Go client test"}).Status
			case <-ctx.Done():
				approved <- 0
			}
		}()
		res := call(t, params)
		if status := <-approved; status != 200 {
			t.Errorf("approve: %d", status)
		}
		if res.IsError || res.Meta["toolbelt/status"] != "succeeded" {
			t.Fatalf("held call: %v %s %v", res.IsError, mcpText(t, res), res.Meta)
		}
		// The client hands notifications to the handler on their own
		// goroutine: the last may be handled after the answer.
		select {
		case <-ended:
		case <-ctx.Done():
		}
		mu.Lock()
		defer mu.Unlock()
		checkProgress(t, progress)
	})

	t.Run("parked without progress", func(t *testing.T) {
		res := call(t, &mcp.CallToolParams{Name: "overwrite_note", Arguments: map[string]any{"path": "parked.txt", "content": "x"}})
		if !res.IsError || !strings.HasPrefix(mcpText(t, res), "CONFIRMATION_REQUIRED: ") || res.Meta["toolbelt/status"] != "awaiting_approval" {
			t.Errorf("parked: %v %s %v", res.IsError, mcpText(t, res), res.Meta)
		}
	})

	t.Run("safe call", func(t *testing.T) {
		res := call(t, &mcp.CallToolParams{Name: "file_read", Arguments: map[string]any{"path": "followed.txt"}})
		if sc, ok := res.StructuredContent.(map[string]any); res.IsError || !ok || sc["content"] != "approved while waiting" {
			t.Errorf("read: %v %s", res.IsError, mcpText(t, res))
		}
		// Without an MCP session, calls run in the principal's default
		// call session, as API calls without a session_id do.
		id, _ := res.Meta["toolbelt/call_id"].(string)
		if rec := app.do(t, "agent", "GET", "/api/v1/calls/"+id, nil).JSON(t); rec["session_id"] != fmt.Sprintf("principal-%d", app.ids["agent"]) {
			t.Errorf("call session %v, want the principal's default", rec["session_id"])
		}
	})

	t.Run("refused", func(t *testing.T) {
		res := call(t, &mcp.CallToolParams{Name: "file_read", Arguments: map[string]any{"path": "../../etc/passwd"}})
		if !res.IsError || !strings.HasPrefix(mcpText(t, res), "PATH_NOT_ALLOWED: ") || res.Meta["toolbelt/status"] != "refused" {
			t.Errorf("outside the work directory: %v %s", res.IsError, mcpText(t, res))
		}
	})
}
