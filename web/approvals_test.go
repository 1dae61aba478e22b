package web_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"toolbelt/internal/poll"
	"toolbelt/models"
)

// poll reads a call until it leaves the waiting states (a bounded wait for
// background work, not a timing assertion).
func (a *testApp) poll(t *testing.T, role, id string) map[string]any {
	t.Helper()
	var rec map[string]any
	poll.Until(t, 20*time.Second, "call "+id+" ended", func() (bool, string) {
		rec = a.do(t, role, "GET", "/api/v1/calls/"+id, nil).JSON(t)
		switch rec["status"] {
		case "queued", "running", "awaiting_approval":
			return false, fmt.Sprint("still ", rec["status"])
		}
		return true, ""
	})
	return rec
}

// dangerousWrite registers a dangerous file-writing tool.
func dangerousWrite(t *testing.T, app *testApp) {
	t.Helper()
	def := toolDef("overwrite_note", func(m map[string]any) {
		m["category"] = "filesystem"
		m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{
			"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}, "required": []any{"path", "content"}}
		m["security"] = map[string]any{"level": "dangerous"}
		m["runner"] = map[string]any{"kind": "builtin", "builtin": "file_write"}
	})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatal(string(r.Body))
	}
	agent := fmt.Sprint(app.ids["agent"])
	app.do(t, "admin", "PUT", "/api/v1/principals/"+agent+"/grants", map[string]any{"categories": []string{"filesystem"}})
}

// TestApprovalFlow walks a dangerous call through approval and denial.
func TestApprovalFlow(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	dangerousWrite(t, app)
	ask := func(content string) (string, string) {
		r := app.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "overwrite_note", "session_id": "ap", "arguments": map[string]any{"path": "n.txt", "content": content}})
		res := r.JSON(t)
		if r.Status != 202 || res["status"] != "awaiting_approval" || r.Header.Get("Location") != "/api/v1/calls/"+res["call_id"].(string) || errCode(res) != "CONFIRMATION_REQUIRED" {
			t.Fatalf("dangerous call: %d %v %v", r.Status, r.Header, res)
		}
		return res["call_id"].(string), res["data"].(map[string]any)["approval_id"].(string)
	}
	callID, approvalID := ask("approved content")
	// Nothing ran yet.
	if _, err := os.Stat(filepath.Join(filepath.Dir(app.dbPath), "sessions", fmt.Sprintf("p%d", app.ids["agent"]), "ap", "n.txt")); err == nil {
		t.Fatal("the dangerous call ran before approval")
	}
	pending := app.do(t, "reviewer", "GET", "/api/v1/approvals", nil).JSON(t)["approvals"].([]any)
	if len(pending) != 1 || pending[0].(map[string]any)["id"] != approvalID || pending[0].(map[string]any)["tool"] != "overwrite_note" {
		t.Fatalf("queue %v", pending)
	}
	if r := app.do(t, "agent", "POST", "/api/v1/approvals/"+approvalID+"/approve", map[string]any{}); r.Status != 403 {
		t.Errorf("agent approving: %d", r.Status)
	}
	if r := app.do(t, "reviewer", "POST", "/api/v1/approvals/"+approvalID+"/approve", map[string]any{"reason": "fine"}); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	if r := app.do(t, "reviewer", "POST", "/api/v1/approvals/"+approvalID+"/approve", map[string]any{}); r.Status != 409 {
		t.Errorf("approve twice: %d", r.Status)
	}
	rec := app.poll(t, "agent", callID)
	if rec["status"] != "succeeded" {
		t.Fatalf("approved call: %v", rec)
	}
	got, _ := os.ReadFile(filepath.Join(filepath.Dir(app.dbPath), "sessions", fmt.Sprintf("p%d", app.ids["agent"]), "ap", "n.txt"))
	if string(got) != "approved content" {
		t.Errorf("file after the approved call: %q", got)
	}
	used := app.do(t, "admin", "GET", "/api/v1/approvals?status=used", nil).JSON(t)["approvals"].([]any)
	if len(used) != 1 {
		t.Errorf("approval not marked used: %v", used)
	}

	// Denial needs a reason, which reaches the agent.
	callID, approvalID = ask("denied content")
	if r := app.do(t, "reviewer", "POST", "/api/v1/approvals/"+approvalID+"/deny", map[string]any{}); r.Status != 422 {
		t.Errorf("deny without a reason: %d", r.Status)
	}
	if r := app.do(t, "reviewer", "POST", "/api/v1/approvals/"+approvalID+"/deny", map[string]any{"reason": "overwriting notes is not allowed today"}); r.Status != 200 {
		t.Fatalf("deny: %d %s", r.Status, r.Body)
	}
	rec = app.poll(t, "agent", callID)
	res := rec["result"].(map[string]any)
	if rec["status"] != "failed" || errCode(res) != "CONFIRMATION_DENIED" || !strings.Contains(res["error"].(map[string]any)["suggestion"].(string), "not allowed today") {
		t.Errorf("denied call: %v", rec)
	}

	// An admin cannot approve their own call.
	r := app.do(t, "admin", "POST", "/api/v1/calls", map[string]any{"tool": "overwrite_note", "arguments": map[string]any{"path": "x", "content": "y"}})
	own := r.JSON(t)["data"].(map[string]any)["approval_id"].(string)
	if r := app.do(t, "admin", "POST", "/api/v1/approvals/"+own+"/approve", map[string]any{}); r.Status != 403 {
		t.Errorf("self-approval: %d %s", r.Status, r.Body)
	}
}

// TestApprovalExpiry ends a call whose approval ran out of time.
func TestApprovalExpiry(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	dangerousWrite(t, app)
	r := app.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "overwrite_note", "arguments": map[string]any{"path": "n", "content": "c"}})
	res := r.JSON(t)
	callID, approvalID := res["call_id"].(string), res["data"].(map[string]any)["approval_id"].(string)
	if err := app.store.DB().Model(&models.Approval{}).Where("id = ?", approvalID).Update("expires_at", time.Now().Add(-time.Minute)).Error; err != nil {
		t.Fatal(err)
	}
	if r := app.do(t, "reviewer", "POST", "/api/v1/approvals/"+approvalID+"/approve", map[string]any{}); r.Status != 409 {
		t.Errorf("approving an expired approval: %d %s", r.Status, r.Body)
	}
	rec := app.poll(t, "agent", callID)
	if rec["status"] != "failed" || !strings.Contains(fmt.Sprint(rec["result"]), "expired") {
		t.Errorf("expired call: %v", rec)
	}
}

// TestAsyncCallAndRecovery runs an async call, and recovers calls after a
// crash: running ones are interrupted, approved ones run.
func TestAsyncCallAndRecovery(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	r := app.do(t, "admin", "POST", "/api/v1/calls", map[string]any{"tool": "file_write", "async": true, "session_id": "as", "arguments": map[string]any{"path": "a.txt", "content": "async"}})
	res := r.JSON(t)
	if r.Status != 202 || res["status"] != "queued" {
		t.Fatalf("async call: %d %v", r.Status, res)
	}
	if rec := app.poll(t, "admin", res["call_id"].(string)); rec["status"] != "succeeded" {
		t.Fatalf("async result: %v", rec)
	}
	// The cheap guards answer an async call at once.
	for _, tc := range []struct {
		body   map[string]any
		status int
		code   string
	}{
		{map[string]any{"tool": "no_such_tool", "async": true}, 404, "TOOL_NOT_FOUND"},
		{map[string]any{"tool": "file_read", "async": true, "arguments": map[string]any{}}, 422, "VALIDATION_ERROR"},
	} {
		r := app.do(t, "admin", "POST", "/api/v1/calls", tc.body)
		if r.Status != tc.status || errCode(r.JSON(t)) != tc.code {
			t.Errorf("%v: %d %s", tc.body, r.Status, r.Body)
		}
	}

	// A crash left one call running and one approved but not run.
	dangerousWrite(t, app)
	r = app.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "overwrite_note", "session_id": "rc", "arguments": map[string]any{"path": "r.txt", "content": "after restart"}})
	parked := r.JSON(t)
	ctx := context.Background()
	db := app.store.DB()
	db.Model(&models.Approval{}).Where("id = ?", parked["data"].(map[string]any)["approval_id"]).Updates(map[string]any{"status": "approved"})
	db.Model(&models.Call{}).Where("id = ?", parked["call_id"]).Update("status", "queued")
	stuck := &models.Call{ID: "stuckcall0000001", Tool: "file_list", Status: "running", Request: `{"tool":"file_list"}`, CreatedAt: time.Now()}
	if err := app.store.SaveCall(ctx, stuck); err != nil {
		t.Fatal(err)
	}
	if err := app.invoker.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if rec := app.poll(t, "admin", "stuckcall0000001"); rec["status"] != "interrupted" {
		t.Errorf("running call after a crash: %v", rec["status"])
	}
	if rec := app.poll(t, "agent", parked["call_id"].(string)); rec["status"] != "succeeded" {
		t.Errorf("approved call after a restart: %v", rec)
	}
}

// TestCancelCalls cancels a call waiting for approval and one running.
func TestCancelCalls(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	dangerousWrite(t, app)
	res := app.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "overwrite_note", "arguments": map[string]any{"path": "n", "content": "c"}}).JSON(t)
	callID, approvalID := res["call_id"].(string), res["data"].(map[string]any)["approval_id"].(string)
	if r := app.do(t, "reviewer", "DELETE", "/api/v1/calls/"+callID, nil); r.Status != 403 {
		t.Errorf("reviewer cancelling: %d", r.Status)
	}
	if r := app.do(t, "agent", "DELETE", "/api/v1/calls/"+callID, nil); r.Status != 202 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	if rec := app.poll(t, "agent", callID); rec["status"] != "failed" || rec["error_code"] != "CANCELLED" {
		t.Errorf("cancelled call: %v", rec)
	}
	if r := app.do(t, "reviewer", "POST", "/api/v1/approvals/"+approvalID+"/approve", map[string]any{}); r.Status != 409 {
		t.Errorf("approving a cancelled call: %d", r.Status)
	}
	if r := app.do(t, "agent", "DELETE", "/api/v1/calls/"+callID, nil); r.Status != 409 {
		t.Errorf("cancelling twice: %d", r.Status)
	}
}

// TestCallEventsSSE streams a call waiting for approval until its result.
func TestCallEventsSSE(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	dangerousWrite(t, app)
	srv := httptest.NewServer(app.handler)
	defer srv.Close()
	res := app.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "overwrite_note", "arguments": map[string]any{"path": "e.txt", "content": "streamed"}}).JSON(t)
	callID, approvalID := res["call_id"].(string), res["data"].(map[string]any)["approval_id"].(string)
	req, _ := http.NewRequest("GET", srv.URL+"/api/v1/calls/"+callID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+app.keys["agent"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if first := <-lines; first != "event: status" {
		t.Fatalf("first line %q", first)
	}
	if data := <-lines; !strings.Contains(data, "awaiting_approval") {
		t.Fatalf("first status %q", data)
	}
	if r := app.do(t, "reviewer", "POST", "/api/v1/approvals/"+approvalID+"/approve", map[string]any{}); r.Status != 200 {
		t.Fatal(string(r.Body))
	}
	var seen []string
	for l := range lines {
		if strings.HasPrefix(l, "event: ") {
			seen = append(seen, strings.TrimPrefix(l, "event: "))
		}
		if strings.HasPrefix(l, "data: ") && seen[len(seen)-1] == "result" {
			if !strings.Contains(l, `"status":"succeeded"`) {
				t.Errorf("result %s", l)
			}
		}
	}
	if len(seen) < 3 || seen[len(seen)-1] != "result" || !slices.Contains(seen, "attempt") {
		t.Errorf("events %v", seen)
	}
}
