package web_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"toolbelt/internal/poll"
)

// TestDisabledPrincipalsPendingWorkNeverRuns: an agent has a call waiting
// for a reviewer and async calls waiting in a full category queue when an
// admin disables it. The reviewer's approval and the queue's free slots
// then find a disabled caller: each call ends PERMISSION_DENIED and no
// file it would have written exists on the host, while another
// principal's call queued behind them still runs.
func TestDisabledPrincipalsPendingWorkNeverRuns(t *testing.T) {
	app := newTestApp(t)
	dangerousWrite(t, app)
	agent := itoa(app.ids["agent"])
	for _, def := range []map[string]any{
		toolDef("slow_wait", func(m map[string]any) {
			m["category"], m["parameters"] = "browser", map[string]any{"type": "object", "properties": map[string]any{}}
			m["runner"] = map[string]any{"kind": "command", "argv": []string{"sleep", "2"}}
		}),
		toolDef("browser_note", func(m map[string]any) {
			m["category"] = "browser"
			m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{
				"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}, "required": []any{"path", "content"}}
			m["runner"] = map[string]any{"kind": "builtin", "builtin": "file_write"}
		}),
	} {
		if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
			t.Fatalf("register %s: %d %s", def["name"], r.Status, r.Body)
		}
	}
	app.do(t, "admin", "PUT", "/api/v1/principals/"+agent+"/grants", map[string]any{"categories": []string{"filesystem", "browser"}})
	async := func(role, tool string, args map[string]any) string {
		t.Helper()
		code, res := app.call(t, role, map[string]any{"tool": tool, "async": true, "session_id": "dis", "arguments": args})
		if code != 202 {
			t.Fatalf("%s's async %s: %d %v", role, tool, code, res)
		}
		return res["call_id"].(string)
	}

	// The browser category runs 3 at a time: the admin's three slow
	// calls hold it, the agent's notes and then the admin's wait.
	var slow []string
	for range 3 {
		slow = append(slow, async("admin", "slow_wait", map[string]any{}))
	}
	for _, id := range slow {
		poll.Until(t, 20*time.Second, "slow call "+id+" running", func() (bool, string) {
			s := app.do(t, "admin", "GET", "/api/v1/calls/"+id, nil).JSON(t)["status"]
			return s == "running", fmt.Sprint(s)
		})
	}
	var notes []string
	for i := range 2 {
		notes = append(notes, async("agent", "browser_note", map[string]any{"path": fmt.Sprintf("queued-%d.txt", i), "content": "ran"}))
	}
	adminNote := async("admin", "browser_note", map[string]any{"path": "admin.txt", "content": "ran"})
	waiting, approval := dangerousCall(t, app, "agent", "approved after the agent was disabled")

	if r := app.do(t, "admin", "POST", "/api/v1/principals/"+agent+"/disable", nil); r.Status != 200 {
		t.Fatalf("disable: %d %s", r.Status, r.Body)
	}
	if r := app.do(t, "reviewer", "POST", "/api/v1/approvals/"+approval+"/approve", map[string]any{"reason": "fine"}); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	for _, id := range append(notes, waiting) {
		rec := app.poll(t, "admin", id)
		if rec["status"] != "failed" || rec["error_code"] != "PERMISSION_DENIED" {
			t.Errorf("the disabled agent's call %s (%v) ended %v %v", id, rec["tool"], rec["status"], rec["error_code"])
		}
	}
	for _, f := range []string{"queued-0.txt", "queued-1.txt", "note.txt"} {
		for _, session := range []string{"dis", "console"} {
			if _, err := os.Stat(filepath.Join(app.workDir(t, "agent", session), f)); !os.IsNotExist(err) {
				t.Errorf("%s/%s exists on the host: a disabled agent's call ran (%v)", session, f, err)
			}
		}
	}
	if rec := app.poll(t, "admin", adminNote); rec["status"] != "succeeded" {
		t.Errorf("the admin's call queued behind them: %v %v", rec["status"], rec["error"])
	}
	for _, id := range slow {
		if rec := app.poll(t, "admin", id); rec["status"] != "succeeded" {
			t.Errorf("the admin's slow call: %v %v", rec["status"], rec["error"])
		}
	}
}
