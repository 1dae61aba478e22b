package web_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
)

// TestE2EApproveInConsole: an agent's dangerous call waits (202); a
// reviewer signed in to the console sees it (and a later one arrive
// without reloading), approves it, and finds it succeeded in the history.
func TestE2EApproveInConsole(t *testing.T) {
	app := newTestApp(t)
	dangerousWrite(t, app)
	callID, approvalID := dangerousCall(t, app, "agent", "written after approval")

	e := newE2E(t, app)
	e.signIn("reviewer")
	e.run("open the queue",
		chromedp.Click(tid("nav-Approvals")),
		chromedp.WaitVisible(tid("approval-"+approvalID)),
		loaded(),
	)
	card := `[data-testid="approval-` + approvalID + `"] `
	if got := e.text(chromedp.CSS(card + `[data-testid="approval-requester"]`)); got != "test-agent" {
		t.Fatalf("requester %q", got)
	}
	if got := e.text(chromedp.CSS(card + `[data-testid="approval-left"]`)); !strings.HasSuffix(got, "left") {
		t.Fatalf("time left %q", got)
	}

	// A call made while the page is open shows up by polling, not reloading.
	if _, err := chromedp.Run(e.ctx, chromedp.Evaluate[any]("window.__stayed = true")); err != nil {
		t.Fatal(err)
	}
	_, secondID := dangerousCall(t, app, "agent", "a second note")
	e.run("the queue refreshes itself", chromedp.WaitVisible(tid("approval-"+secondID)))
	if stayed, err := chromedp.Run(e.ctx, chromedp.Evaluate[bool]("window.__stayed === true")); err != nil || !stayed {
		t.Fatalf("the page reloaded instead of refreshing the list (%v)", err)
	}

	// Denying without a reason is refused beside the field.
	e.run("deny without a reason",
		chromedp.Click(tid("deny-"+secondID)),
		chromedp.WaitVisible(tid("error-reason-"+secondID)),
		loaded(),
	)
	if got := e.text(tid("error-reason-" + secondID)); !strings.Contains(got, "required when denying") {
		t.Fatalf("reason error %q", got)
	}

	// A reason typed before a refresh survives it.
	e.run("type a reason", chromedp.Navigate(e.URL+"/admin/approvals"), chromedp.WaitVisible(tid("reason-"+approvalID)),
		chromedp.SendKeys(tid("reason-"+approvalID), "only writes a note"), chromedp.Blur(tid("reason-"+approvalID)))
	_, thirdID := dangerousCall(t, app, "agent", "a third note")
	e.run("refresh with a reason typed", chromedp.WaitVisible(tid("approval-"+thirdID)))
	if got, err := chromedp.Run(e.ctx, chromedp.Value(tid("reason-"+approvalID))); err != nil || got != "only writes a note" {
		t.Fatalf("the refresh lost the typed reason: %q %v", got, err)
	}

	e.run("approve",
		chromedp.Click(tid("approve-"+approvalID)),
		chromedp.WaitVisible(tid("notice")),
		loaded(),
	)
	if got := e.text(tid("notice")); !strings.Contains(got, "Approved") {
		t.Fatalf("notice %q", got)
	}
	if rec := app.poll(t, "agent", callID); rec["status"] != "succeeded" {
		t.Fatalf("approved call: %v", rec)
	}

	row := `[data-call-id="` + callID + `"] `
	e.run("find it in the history",
		chromedp.Click(tid("nav-History")),
		chromedp.WaitVisible(chromedp.CSS(row+`[data-testid="call-status"]`)),
		loaded(),
	)
	if got := e.text(chromedp.CSS(row + `[data-testid="call-status"]`)); got != "succeeded" {
		t.Fatalf("history status %q", got)
	}
	e.run("open the call",
		chromedp.Click(chromedp.CSS(row+`[data-testid="call-link"]`)),
		chromedp.WaitVisible(tid("call-timings")),
		loaded(),
	)
	if got := e.text(tid("call-status")); got != "succeeded" {
		t.Fatalf("detail status %q", got)
	}
	if got := e.text(tid("call-result")); !strings.Contains(got, `"bytes_written": 22`) {
		t.Fatalf("result %q", got)
	}
	// Who decided, and the wait apart: in the total, said so, and among
	// the stages, before the approve guard that used it.
	if got := e.text(tid("decision-status")) + " by " + e.text(tid("decision-by")); got != "approved by test-reviewer" {
		t.Errorf("the decision reads %q", got)
	}
	if got := e.text(tid("call-total-ms")); !strings.Contains(got, "the approval wait included") {
		t.Errorf("the total reads %q", got)
	}
	stages, err := chromedp.Run(e.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid="call-stage"]')].map(r => r.cells[0].textContent.trim())`))
	if i := slices.Index(stages, "waiting for approval"); err != nil || i < 0 || i+1 >= len(stages) || stages[i+1] != "approve" {
		t.Errorf("the stages read %v (%v): the wait should come just before approve", stages, err)
	}
}

// TestE2EApproveARefusedCall: a reviewer sees, in the card of a chained
// shell command, that the security checks will refuse it; approving it
// anyway, the decided list shows it refused, not "ran".
func TestE2EApproveARefusedCall(t *testing.T) {
	app := newTestApp(t)
	r := app.do(t, "admin", "POST", "/api/v1/calls", map[string]any{"tool": "shell_exec", "session_id": "e2e",
		"arguments": map[string]any{"command": "ls | wc -l"}})
	res := r.JSON(t)
	if r.Status != 202 {
		t.Fatalf("shell call: %d %v", r.Status, res)
	}
	callID, approvalID := res["call_id"].(string), res["data"].(map[string]any)["approval_id"].(string)

	e := newE2E(t, app)
	e.signIn("reviewer")
	e.run("open the queue", chromedp.Click(tid("nav-Approvals")), chromedp.WaitVisible(tid("refusal-"+approvalID)), loaded())
	if got := e.text(tid("refusal-" + approvalID)); !strings.Contains(got, "will refuse this call once approved (COMMAND_REJECTED") {
		t.Fatalf("warning %q", got)
	}
	e.run("approve anyway", chromedp.Click(tid("approve-"+approvalID)), chromedp.WaitVisible(tid("notice")), loaded())
	if rec := app.poll(t, "admin", callID); rec["status"] != "refused" {
		t.Fatalf("approved call: %v", rec)
	}
	status := chromedp.CSS(`[data-testid="decided-` + approvalID + `"] [data-testid="decided-status"]`)
	e.run("reload the decisions", chromedp.Navigate(e.URL+"/admin/approvals"), chromedp.WaitVisible(status), loaded())
	if got := e.text(status); got != "approved · refused COMMAND_REJECTED" {
		t.Fatalf("decided status %q", got)
	}
}

// TestE2EDecideByKeyboard: a reviewer lands on the queue at sign-in; the
// queue does not refresh while the pointer is over it (a card never moves
// under a click about to land) and does once the pointer leaves; with a
// card focused, "a" approves it and "d" denies it (a denial still needs
// its reason).
func TestE2EDecideByKeyboard(t *testing.T) {
	app := newTestApp(t)
	dangerousWrite(t, app)
	_, first := dangerousCall(t, app, "agent", "approved by a key")

	e := newE2E(t, app)
	e.signIn("reviewer")
	if url, err := chromedp.Run(e.ctx, chromedp.Evaluate[string]("location.pathname")); err != nil || url != "/admin/approvals" {
		t.Fatalf("a reviewer lands on %q (%v), want the queue", url, err)
	}
	card := `[data-testid="approval-` + first + `"]`
	box, err := chromedp.Run(e.ctx, chromedp.Evaluate[[]float64](`(() => { const r = document.querySelector(`+strconv.Quote(card)+`).getBoundingClientRect(); return [r.x + r.width / 2, r.y + 20]; })()`))
	if err != nil {
		t.Fatal(err)
	}
	e.run("point at the card", chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, box[0], box[1]))
	_, second := dangerousCall(t, app, "agent", "denied by a key")
	// Wait for two of the queue's polls to come (and be skipped).
	if _, err := chromedp.Run(e.ctx, chromedp.Evaluate[any](`window.__polls = 0; document.addEventListener("htmx:beforeRequest", () => window.__polls++)`)); err != nil {
		t.Fatal(err)
	}
	e.run("two polls come", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Poll[bool](`window.__polls >= 2`)(ctx, tg)
		return err
	}))
	if e.count(`[data-testid="approval-`+second+`"]`) != 0 {
		t.Fatal("the queue refreshed under the pointer")
	}
	e.run("move the pointer away", chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, 1, 1), chromedp.WaitVisible(tid("approval-"+second)))

	e.run("approve with a", chromedp.Focus(chromedp.CSS(card)), chromedp.KeyEvent("a"), chromedp.WaitVisible(tid("notice")), loaded())
	if got := e.text(tid("notice")); !strings.HasPrefix(got, "Approved the overwrite_note call") {
		t.Fatalf("after a: %q", got)
	}
	e.run("deny with d", chromedp.Focus(tid("approval-"+second)), chromedp.KeyEvent("d"), chromedp.WaitVisible(tid("error-reason-"+second)), loaded())
	if state := approvalStateOf(t, app, second); state != "pending" {
		t.Errorf("a denial without its reason: %s", state)
	}
	if state := approvalStateOf(t, app, first); state != "approved" && state != "used" {
		t.Errorf("the approved call's approval: %s", state)
	}
}

// TestE2EConsoleTasks times three of a console user's jobs in Chromium,
// counting the clicks and keys a person makes, and logs both (the figures
// of the note; nothing is asserted on time): a reviewer approves
// a call with its whole context from sign-in; an admin finds a principal
// among twenty and revokes one of its keys; an admin finds why a tool's
// calls fail.
func TestE2EConsoleTasks(t *testing.T) {
	app := newTestApp(t)
	dangerousWrite(t, app)
	for i := range 20 {
		app.do(t, "admin", "POST", "/api/v1/principals", map[string]any{"name": fmt.Sprintf("research-agent-%02d", i), "role": "agent"})
	}
	app.do(t, "admin", "POST", "/api/v1/principals/"+itoa(app.ids["agent"])+"/keys", map[string]any{"label": "laptop"})
	for range 3 {
		app.call(t, "agent", map[string]any{"tool": "file_read", "session_id": "t", "arguments": map[string]any{"path": "missing.txt"}})
	}
	app.call(t, "agent", map[string]any{"tool": "file_write", "session_id": "t", "arguments": map[string]any{"path": "ok.txt", "content": "x"}})
	_, approval := dangerousCall(t, app, "agent", "the task's note")

	e := newE2E(t, app)
	start, actions := time.Now(), 0
	act := func(n int, what string, steps ...chromedp.Action[chromedp.Void]) { actions += n; e.run(what, steps...) }
	// A click or key that loads a page waits for its response
	// (RunResponse), so the next step never finds the page that is going
	// away, however slow the machine.
	load := func(what string, click chromedp.Action[chromedp.Void], then chromedp.CSS) {
		t.Helper()
		actions++
		if _, err := chromedp.RunResponse(e.ctx, click); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		e.run(what, chromedp.WaitVisible(then), loaded())
	}
	act(1, "type the reviewer's key", chromedp.Navigate(e.URL+"/admin"), chromedp.WaitVisible(tid("sign-in-form")),
		chromedp.SendKeys(chromedp.CSS("#key"), app.keys["reviewer"]))
	load("sign in as the reviewer", chromedp.Click(tid("sign-in")), tid("approval-"+approval))
	for _, id := range []string{"approval-level", "approval-why", "approval-findings"} {
		if e.count(`[data-testid="approval-`+approval+`"] [data-testid="`+id+`"]`) != 1 {
			t.Fatalf("the panel lacks %s", id)
		}
	}
	act(1, "Tab to the card", chromedp.Focus(tid("approval-"+approval)))
	load("approve by keyboard (a)", chromedp.KeyEvent("a"), tid("notice"))
	t.Logf("approve a call with its context, from sign-in: %d clicks and keys, %.1f s", actions, time.Since(start).Seconds())

	e = newE2E(t, app)
	e.signIn("admin")
	start, actions = time.Now(), 0
	row := `[data-testid="principal-test-agent"] `
	load("open Access", chromedp.Click(tid("nav-Access")), tid("principal-search"))
	act(1, "type the agent's name", chromedp.SendKeys(tid("principal-q"), "test-agent"))
	load("find it", chromedp.Click(tid("principal-find")), chromedp.CSS(row+`[data-testid="revoke-open"]`))
	act(1, "open a key's Revoke…", chromedp.Click(chromedp.CSS(row+`[data-testid="revoke-open"]`)), chromedp.WaitVisible(chromedp.CSS(row+`[data-testid="revoke"]`)))
	load("revoke it", chromedp.Click(chromedp.CSS(row+`[data-testid="revoke"]`)), tid("notice"))
	if got := e.text(tid("notice")); !strings.Contains(got, "of test-agent revoked") {
		t.Fatalf("notice %q", got)
	}
	t.Logf("find a principal among %d and revoke a key: %d clicks and keys, %.1f s", 23, actions, time.Since(start).Seconds())

	start, actions = time.Now(), 0
	load("open the dashboard", chromedp.Click(tid("nav-Dashboard")), tid("top-file_read"))
	load("open file_read's calls", chromedp.Click(chromedp.CSS(`[data-testid="top-file_read"] [data-testid="top-calls"]`)), tid("call-row"))
	load("open a failed one", chromedp.Click(chromedp.CSS(`[data-testid="call-row"] [data-testid="call-link"]`)), tid("call-error-message"))
	if got := e.text(tid("call-error-message")); !strings.Contains(got, "does not exist") {
		t.Fatalf("the error %q", got)
	}
	t.Logf("find why a tool's calls fail: %d clicks, %.1f s", actions, time.Since(start).Seconds())
}
