package web_test

import (
	"fmt"
	"strings"
	"testing"
)

func compositeTool(name string, steps []any, edits ...func(m map[string]any)) map[string]any {
	return toolDef(name, append([]func(m map[string]any){func(m map[string]any) {
		m["category"] = "filesystem"
		m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{
			"path": map[string]any{"type": "string"}, "text": map[string]any{"type": "string"}}, "required": []any{"path", "text"}}
		m["security"] = map[string]any{"level": "moderate"}
		m["runner"] = map[string]any{"kind": "composite", "steps": steps}
	}}, edits...)...)
}

func ref(p string) map[string]any { return map[string]any{"$ref": p} }

// A composite writes then reads a note: each step is a call of its own,
// recorded with the composite as its parent; the second step reads what
// the first wrote, through a reference to its result.
func TestCompositeRuns(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	def := compositeTool("save_and_read", []any{
		map[string]any{"tool": "file_write", "arguments": map[string]any{"path": ref("#/input/path"), "content": ref("#/input/text")}},
		map[string]any{"tool": "file_read", "arguments": map[string]any{"path": ref("#/steps/0/data/path")}},
	})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	code, res := app.call(t, "admin", map[string]any{"tool": "save_and_read", "session_id": "cmp", "arguments": map[string]any{"path": "n.txt", "text": "remember the milk"}})
	d := data(res)
	if code != 200 || res["status"] != "succeeded" || d["output"].(map[string]any)["content"] != "remember the milk" {
		t.Fatalf("composite: %d %v", code, res)
	}
	steps := d["steps"].([]any)
	if len(steps) != 2 {
		t.Fatalf("steps %v", steps)
	}
	for i, s := range steps {
		id := s.(map[string]any)["call_id"].(string)
		rec := app.do(t, "admin", "GET", "/api/v1/calls/"+id, nil).JSON(t)
		if rec["parent_id"] != res["call_id"] || rec["status"] != "succeeded" || rec["session_id"] != "cmp" {
			t.Errorf("step %d record: %v", i, rec)
		}
	}

	// A step that fails stops the composite with its error and suggestion.
	bad := compositeTool("read_outside", []any{
		map[string]any{"tool": "file_read", "arguments": map[string]any{"path": "../../etc/passwd"}},
		map[string]any{"tool": "file_write", "arguments": map[string]any{"path": "never.txt", "content": "x"}},
	})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", bad); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	_, res = app.call(t, "admin", map[string]any{"tool": "read_outside", "session_id": "cmp", "arguments": map[string]any{"path": "a", "text": "b"}})
	e, _ := res["error"].(map[string]any)
	if res["status"] != "failed" || e["code"] != "PATH_NOT_ALLOWED" || !strings.Contains(e["message"].(string), "step 0 (file_read)") || e["suggestion"] == "" {
		t.Fatalf("failed step: %v", res)
	}
	if got := data(res)["steps"].([]any); len(got) != 1 {
		t.Errorf("the composite went on after a failed step: %v", got)
	}
}

// A composite with a dangerous step waits for approval as a whole; once a
// reviewer approves it, its steps run without asking again.
func TestCompositeWithDangerousStepWaits(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	dangerousWrite(t, app) // overwrite_note, dangerous; the agent holds filesystem
	def := compositeTool("note_twice", []any{
		map[string]any{"tool": "overwrite_note", "arguments": map[string]any{"path": ref("#/input/path"), "content": ref("#/input/text")}},
		map[string]any{"tool": "file_read", "arguments": map[string]any{"path": ref("#/input/path")}},
	})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	r := app.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "note_twice", "session_id": "cmp", "arguments": map[string]any{"path": "n.txt", "text": "approved"}})
	res := r.JSON(t)
	if r.Status != 202 || res["status"] != "awaiting_approval" {
		t.Fatalf("composite with a dangerous step: %d %v", r.Status, res)
	}
	approval := data(res)["approval_id"].(string)
	if r := app.do(t, "reviewer", "POST", "/api/v1/approvals/"+approval+"/approve", map[string]any{"reason": "fine"}); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	if final := app.poll(t, "agent", res["call_id"].(string)); final["status"] != "succeeded" {
		t.Fatalf("approved composite: %v", final)
	}
	pending := app.do(t, "reviewer", "GET", "/api/v1/approvals", nil).JSON(t)["approvals"].([]any)
	if len(pending) != 0 {
		t.Errorf("a step asked for approval again: %v", pending)
	}

	// A composite whose step is that composite: it waits for one approval,
	// which covers the steps two levels down.
	outer := compositeTool("note_outer", []any{
		map[string]any{"tool": "note_twice", "arguments": map[string]any{"path": ref("#/input/path"), "text": ref("#/input/text")}},
	})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", outer); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	r = app.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "note_outer", "session_id": "cmp", "arguments": map[string]any{"path": "n.txt", "text": "nested"}})
	res = r.JSON(t)
	if r.Status != 202 || res["status"] != "awaiting_approval" {
		t.Fatalf("composite of a composite with a dangerous step: %d %v", r.Status, res)
	}
	if r := app.do(t, "reviewer", "POST", "/api/v1/approvals/"+data(res)["approval_id"].(string)+"/approve", map[string]any{"reason": "fine"}); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	if final := app.poll(t, "agent", res["call_id"].(string)); final["status"] != "succeeded" {
		t.Fatalf("approved composite of a composite: %v", final)
	}
	if pending := app.do(t, "reviewer", "GET", "/api/v1/approvals", nil).JSON(t)["approvals"].([]any); len(pending) != 0 {
		t.Errorf("a step two levels down asked for approval: %v", pending)
	}
}

// Arguments may refer to an earlier result of the same session; another
// session's call, an unknown one and a bad pointer are refused.
func TestContextReferences(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	app.do(t, "admin", "PUT", fmt.Sprintf("/api/v1/principals/%d/grants", app.ids["agent"]), map[string]any{"categories": []string{"filesystem"}})
	_, wrote := app.call(t, "agent", map[string]any{"tool": "file_write", "session_id": "ctx", "arguments": map[string]any{"path": "plan.txt", "content": "step one"}})
	id := wrote["call_id"].(string)
	code, res := app.call(t, "agent", map[string]any{"tool": "file_read", "session_id": "ctx", "arguments": map[string]any{"path": ref("call:" + id + "#/data/path")}})
	if code != 200 || data(res)["content"] != "step one" {
		t.Fatalf("reference: %d %v", code, res)
	}
	for name, tc := range map[string]struct {
		session, ref, want string
	}{
		"other session": {"elsewhere", "call:" + id + "#/data/path", "another session"},
		"unknown call":  {"ctx", "call:01a2000000000000000000ff#/data/path", "no call"},
		"bad pointer":   {"ctx", "call:" + id + "#/data/nothing", "no \"nothing\""},
		"not a call":    {"ctx", "#/input/path", "use \"call:"},
	} {
		code, res := app.call(t, "agent", map[string]any{"tool": "file_read", "session_id": tc.session, "arguments": map[string]any{"path": ref(tc.ref)}})
		if e, _ := res["error"].(map[string]any); code != 422 || e["code"] != "VALIDATION_ERROR" || !strings.Contains(e["message"].(string), tc.want) {
			t.Errorf("%s: %d %v", name, code, res)
		}
	}
}

// Composites calling each other in a cycle stop at the depth limit.
func TestCompositeCycleStops(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	a := compositeTool("ping_a", []any{map[string]any{"tool": "file_list", "arguments": map[string]any{}}})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", a); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	b := compositeTool("ping_b", []any{map[string]any{"tool": "ping_a", "arguments": map[string]any{"path": "x", "text": "y"}}})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", b); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	a["version"] = "1.1.0"
	a["runner"] = map[string]any{"kind": "composite", "steps": []any{map[string]any{"tool": "ping_b", "arguments": map[string]any{"path": "x", "text": "y"}}}}
	if r := app.do(t, "admin", "PUT", "/api/v1/tools/ping_a", a); r.Status != 200 {
		t.Fatalf("publish: %d %s", r.Status, r.Body)
	}
	_, res := app.call(t, "admin", map[string]any{"tool": "ping_a", "session_id": "cyc", "arguments": map[string]any{"path": "x", "text": "y"}})
	if e, _ := res["error"].(map[string]any); res["status"] != "failed" || !strings.Contains(fmt.Sprint(e["message"]), "at most 5 levels") {
		t.Fatalf("cycle: %v", res)
	}
}
