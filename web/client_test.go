package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"toolbelt/client"
	"toolbelt/internal/poll"
)

// TestGeneratedClient drives the real server over HTTP with the client
// generated from the OpenAPI 3 document, as an agent, a reviewer and an
// admin: register a tool, select, call, wait for an approval and decide it,
// poll the call, read the history and page the catalog. Every request and
// answer goes through the generated types, so a document that stops
// describing what the server does fails here. Only tool arguments and
// outputs are free-form JSON objects in the API itself.
func TestGeneratedClient(t *testing.T) {
	app := newTestApp(t)
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	as := func(role string) *client.ClientWithResponses {
		c, err := client.NewClientWithResponses(srv.URL, client.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+app.keys[role])
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	admin, reviewer, agent := as("admin"), as("reviewer"), as("agent")

	me, err := agent.WhoAmIWithResponse(ctx)
	if err != nil || me.JSON200 == nil || deref(me.JSON200.Role) != "agent" {
		t.Fatalf("whoami: %v %s", err, body(me))
	}

	// Register a dangerous variant of file_write, with its parameters.
	fw, err := admin.GetToolWithResponse(ctx, "file_write", nil)
	if err != nil || fw.JSON200 == nil || fw.JSON200.Definition == nil || fw.JSON200.Definition.Parameters == nil {
		t.Fatalf("get file_write: %v %s", err, body(fw))
	}
	reg, err := admin.RegisterToolWithResponse(ctx, client.TooldefDefinition{
		Name:        ptr("note_write"),
		Version:     ptr("1.0.0"),
		Description: ptr("Write a note into a file of the session's work directory, once a reviewer agrees."),
		Category:    ptr(client.TooldefDefinitionCategoryFilesystem),
		Tags:        &[]string{"notes"},
		Parameters:  fw.JSON200.Definition.Parameters,
		Security:    &client.TooldefSecurity{Level: ptr(client.TooldefSecurityLevelDangerous)},
		Runner:      &client.TooldefRunner{Kind: ptr(client.TooldefRunnerKindBuiltin), Builtin: ptr("file_write")},
	})
	if err != nil || reg.StatusCode() != http.StatusCreated || reg.JSON201 == nil {
		t.Fatalf("register: %v %d %s", err, reg.StatusCode(), body(reg))
	}
	if got := reg.JSON201; deref(got.Name) != "note_write" || deref(got.Version) != "1.0.0" || deref(got.SecurityLevel) != "dangerous" || !deref(got.Current) {
		t.Errorf("registered %+v", got)
	}
	again, err := admin.RegisterToolWithResponse(ctx, client.TooldefDefinition{Name: ptr("note_write"), Version: ptr("1.0.0"),
		Description: reg.JSON201.Description, Category: ptr(client.TooldefDefinitionCategoryFilesystem), Parameters: fw.JSON200.Definition.Parameters,
		Runner: &client.TooldefRunner{Kind: ptr(client.TooldefRunnerKindBuiltin), Builtin: ptr("file_write")}})
	if err != nil || apiCode(again.JSON409) != "CONFLICT" {
		t.Errorf("register twice: %v %d %s", err, again.StatusCode(), body(again))
	}
	grants, err := admin.SetGrantsWithResponse(ctx, int(app.ids["agent"]), client.AccessGrants{Categories: &[]string{"filesystem"}})
	if err != nil || grants.JSON200 == nil || !slices.Equal(deref(grants.JSON200.Categories), []string{"filesystem"}) {
		t.Fatalf("grants: %v %s", err, body(grants))
	}

	// Selection offers the agent what its grants allow, the new tool too.
	sel, err := agent.SelectToolsWithResponse(ctx, client.SelectionSelectRequest{
		Query: ptr("write a note into a file"), Limit: ptr(10), Format: ptr(client.SelectionSelectRequestFormatOpenai), SessionId: ptr("client"),
	})
	if err != nil || sel.JSON200 == nil {
		t.Fatalf("select: %v %s", err, body(sel))
	}
	var selected []string
	for _, s := range deref(sel.JSON200.Tools) {
		selected = append(selected, deref(s.Name))
		if deref(s.Category) != "filesystem" {
			t.Errorf("selected %s of category %s, outside the agent's grants", deref(s.Name), deref(s.Category))
		}
	}
	if !slices.Contains(selected, "note_write") || deref(sel.JSON200.Format) != "openai" || deref(sel.JSON200.SelectionId) == "" {
		t.Errorf("selection %v: %s", selected, body(sel))
	}

	// A safe call runs at once.
	wrote, err := agent.CallToolWithResponse(ctx, client.InvokeCallRequest{Tool: ptr("file_write"), SessionId: ptr("client"),
		Arguments: &map[string]any{"path": "notes/a.txt", "content": "hello"}})
	if err != nil || wrote.JSON200 == nil || !deref(wrote.JSON200.Success) || deref(wrote.JSON200.Status) != "succeeded" || deref(wrote.JSON200.CallId) == "" {
		t.Fatalf("file_write: %v %d %s", err, wrote.StatusCode(), body(wrote))
	}

	// A dangerous call waits for a reviewer, who finds it in the queue.
	asked, err := agent.CallToolWithResponse(ctx, client.InvokeCallRequest{Tool: ptr("note_write"), SessionId: ptr("client"),
		Arguments: &map[string]any{"path": "notes/b.txt", "content": "approved"}})
	if err != nil || asked.JSON202 == nil || deref(asked.JSON202.Status) != "awaiting_approval" || asked.JSON202.Error == nil || deref(asked.JSON202.Error.Code) != "CONFIRMATION_REQUIRED" {
		t.Fatalf("dangerous call: %v %d %s", err, asked.StatusCode(), body(asked))
	}
	callID := deref(asked.JSON202.CallId)
	if loc := asked.HTTPResponse.Header.Get("Location"); loc != "/api/v1/calls/"+callID {
		t.Errorf("Location %q", loc)
	}
	queue, err := reviewer.ListApprovalsWithResponse(ctx, &client.ListApprovalsParams{})
	if err != nil || queue.JSON200 == nil {
		t.Fatalf("approvals: %v %s", err, body(queue))
	}
	var approvalID string
	for _, a := range deref(queue.JSON200.Approvals) {
		if deref(a.CallId) == callID && deref(a.Tool) == "note_write" && deref(a.Status) == "pending" && deref(a.PrincipalId) == int(app.ids["agent"]) {
			approvalID = deref(a.Id)
		}
	}
	if approvalID == "" {
		t.Fatalf("call %s not in the queue: %s", callID, body(queue))
	}
	self, err := agent.ApproveWithResponse(ctx, approvalID, client.HandlersDecisionRequest{})
	if err != nil || apiCode(self.JSON403) != "FORBIDDEN" {
		t.Errorf("agent approving: %v %d %s", err, self.StatusCode(), body(self))
	}
	ok, err := reviewer.ApproveWithResponse(ctx, approvalID, client.HandlersDecisionRequest{Reason: ptr("a note is fine")})
	if err != nil || ok.JSON200 == nil || deref(ok.JSON200.Status) != "approved" || deref(ok.JSON200.Reason) != "a note is fine" {
		t.Fatalf("approve: %v %d %s", err, ok.StatusCode(), body(ok))
	}

	// The agent polls the call until it has run.
	var done *client.HandlersCallRecord
	poll.Until(t, 20*time.Second, "call "+callID+" has run", func() (bool, string) {
		r, err := agent.GetCallWithResponse(ctx, callID)
		if err != nil || r.JSON200 == nil {
			t.Fatalf("poll: %v %s", err, body(r))
		}
		s := deref(r.JSON200.Status)
		if s != "awaiting_approval" && s != "queued" && s != "running" {
			done = r.JSON200
			return true, ""
		}
		return false, "still " + s
	})
	if deref(done.Status) != "succeeded" || done.Result == nil || !deref(done.Result.Success) || deref(done.Result.CallId) != callID {
		t.Fatalf("approved call: %s %+v", deref(done.Status), done.Result)
	}
	read, err := agent.CallToolWithResponse(ctx, client.InvokeCallRequest{Tool: ptr("file_read"), SessionId: ptr("client"),
		Arguments: &map[string]any{"path": "notes/b.txt"}})
	if err != nil || read.JSON200 == nil || read.JSON200.Data == nil || (*read.JSON200.Data)["content"] != "approved" {
		t.Fatalf("file_read after approval: %v %s", err, body(read))
	}

	// The history, newest first, each call with its typed result.
	hist, err := agent.ListCallsWithResponse(ctx, &client.ListCallsParams{SessionId: ptr("client")})
	if err != nil || hist.JSON200 == nil {
		t.Fatalf("history: %v %s", err, body(hist))
	}
	var tools []string
	for _, c := range deref(hist.JSON200.Calls) {
		tools = append(tools, deref(c.Tool))
		if deref(c.Status) != "succeeded" || c.Result == nil || !deref(c.Result.Success) || deref(c.Result.CallId) != deref(c.Id) {
			t.Errorf("history entry %s %s: %+v", deref(c.Tool), deref(c.Status), c.Result)
		}
	}
	if want := []string{"file_read", "note_write", "file_write"}; !slices.Equal(tools, want) || deref(hist.JSON200.Total) != 3 {
		t.Errorf("history %v (total %d), want %v", tools, deref(hist.JSON200.Total), want)
	}
	byTool, err := reviewer.ListCallsWithResponse(ctx, &client.ListCallsParams{Tool: ptr("note_write"), Status: ptr(client.ListCallsParamsStatusSucceeded)})
	if err != nil || byTool.JSON200 == nil || len(deref(byTool.JSON200.Calls)) != 1 || deref(deref(byTool.JSON200.Calls)[0].Id) != callID {
		t.Errorf("reviewer's history of note_write: %v %s", err, body(byTool))
	}

	// The catalog, a page of four at a time, following next_offset.
	all, err := agent.ListToolsWithResponse(ctx, &client.ListToolsParams{})
	if err != nil || all.JSON200 == nil {
		t.Fatalf("list: %v %s", err, body(all))
	}
	var want []string
	for _, tl := range deref(all.JSON200.Tools) {
		want = append(want, deref(tl.Name))
	}
	if !slices.Contains(want, "note_write") || !slices.IsSorted(want) || int(deref(all.JSON200.Total)) != len(want) || len(want) <= 8 {
		t.Fatalf("catalog %v (total %d)", want, deref(all.JSON200.Total))
	}
	var paged []string
	pages := 0
	for offset := ptr(0); offset != nil; pages++ {
		page, err := agent.ListToolsWithResponse(ctx, &client.ListToolsParams{Limit: ptr(4), Offset: offset})
		if err != nil || page.JSON200 == nil || deref(page.JSON200.Offset) != *offset || deref(page.JSON200.Limit) != 4 {
			t.Fatalf("page at %d: %v %s", *offset, err, body(page))
		}
		for _, tl := range deref(page.JSON200.Tools) {
			paged = append(paged, deref(tl.Name))
		}
		offset = page.JSON200.NextOffset
	}
	if !slices.Equal(paged, want) || pages != (len(want)+3)/4 {
		t.Errorf("%d pages of %v, want %v", pages, paged, want)
	}
	bad, err := agent.ListToolsWithResponse(ctx, &client.ListToolsParams{Limit: ptr(0)})
	if err != nil || apiCode(bad.JSON400) != "INVALID_REQUEST" {
		t.Errorf("limit=0: %v %d %s", err, bad.StatusCode(), body(bad))
	}
}

// apiCode is the code of an error answer, "" when there is none.
func apiCode(e *client.HandlersErrorBody) string {
	if e == nil || e.Error == nil {
		return ""
	}
	return deref(e.Error.Code)
}

// ptr returns a pointer to v, for the generated types' optional fields.
func ptr[T any](v T) *T { return &v }

// deref returns what p points to, or the zero value for nil.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// body is a generated response's raw body, for failure messages ("" when
// the request failed and there is none).
func body[R any, P interface {
	*R
	GetBody() []byte
}](r P) string {
	if r == nil {
		return ""
	}
	return string(r.GetBody())
}
