package web_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"toolbelt/models"
)

// TestE2EConsoleFlows walks, in Chromium, the flows of issue 19 that the
// other e2e tests do not: the dashboard's empty state, its time range and
// a count that opens History filtered; a call's stages; a schema's JSON
// error with its line and column; a grant of a tool that is not safe
// refused at its field; a roll-back that asks first. Each check reads
// what a person sees.
func TestE2EConsoleFlows(t *testing.T) {
	app := newTestApp(t)
	e := newE2E(t, app)
	e.signIn("admin")

	e.run("a new admin's dashboard", chromedp.Navigate(e.URL+"/admin"), chromedp.WaitVisible(tid("dash-empty")), loaded())
	if got := e.text(tid("dash-empty")); !strings.Contains(got, "No calls last 24 hours") || !strings.Contains(got, "register one") {
		t.Errorf("the empty state reads %q", got)
	}
	// One call that runs, one the path guard refuses.
	_, ok := app.call(t, "admin", map[string]any{"tool": "file_write", "session_id": "flows", "arguments": map[string]any{"path": "a.txt", "content": "hello"}})
	id, _ := ok["call_id"].(string)
	app.call(t, "admin", map[string]any{"tool": "file_read", "session_id": "flows", "arguments": map[string]any{"path": "../../etc/passwd"}})

	e.run("the last hour, then its refused calls",
		chromedp.Navigate(e.URL+"/admin"), chromedp.WaitVisible(tid("range-1h")), loaded(),
		chromedp.Click(tid("range-1h")), chromedp.WaitVisible(chromedp.CSS(`[data-testid="range-1h"][aria-current="page"]`)), loaded(),
	)
	if got := e.text(tid("stat-refused")); got != "1 refused" {
		t.Errorf("the refused count reads %q", got)
	}
	e.run("open History from the count", chromedp.Click(tid("stat-refused")), chromedp.WaitVisible(tid("call-row")), loaded())
	rows, err := chromedp.Run(e.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid="call-row"] [data-testid="call-status"]')].map(s => s.textContent.trim())`))
	if err != nil || len(rows) != 1 || rows[0] != "refused" {
		t.Errorf("History from the refused count lists %v (%v), want the one refused call", rows, err)
	}

	e.run("the call's stages", chromedp.Navigate(e.URL+"/admin/calls/"+id), chromedp.WaitVisible(tid("call-stage-list")), loaded())
	stages, err := chromedp.Run(e.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid="call-stage"]')].map(r => r.cells[0].textContent.trim())`))
	if err != nil || len(stages) < 3 || stages[0] != "resolve" || stages[len(stages)-1] != "attempt 1" {
		t.Errorf("the call page's stages read %v (%v)", stages, err)
	}

	e.run("a schema with a trailing comma",
		chromedp.Navigate(e.URL+"/admin/tools/file_read/edit"), chromedp.WaitVisible(chromedp.CSS("#f-parameters")), loaded(),
		chromedp.SetValue(chromedp.CSS("#f-parameters"), "{\n  \"type\": \"object\",\n}"),
		chromedp.Click(tid("form-submit")), chromedp.WaitVisible(tid("error-parameters")), loaded(),
	)
	if got := e.text(tid("error-parameters")); !strings.Contains(got, "line 3, column 1") {
		t.Errorf("the schema's error reads %q, want its line and column", got)
	}
	// The page already shows an error-parameters: wait for the page the
	// submission loads (RunResponse), or the wait would find the old one
	// and the next step run while it is replaced.
	if _, err := chromedp.RunResponse(e.ctx,
		chromedp.SetValue(chromedp.CSS("#f-parameters"), `{"type": "object", "properties": {"path": {"type": "strng"}}}`),
		chromedp.Click(tid("form-submit")),
	); err != nil {
		t.Fatalf("submit a schema with a misspelt type: %v", err)
	}
	e.run("a schema with a misspelt type", chromedp.WaitVisible(tid("error-parameters")), loaded())
	if got := e.text(tid("error-parameters")); !strings.Contains(got, `"strng" is not a JSON Schema type: did you mean "string"?`) {
		t.Errorf("the misspelt type's error reads %q", got)
	}

	form := `[data-testid="principal-test-agent"] `
	e.run("grant a dangerous tool by name",
		chromedp.Navigate(e.URL+"/admin/access?q=test-agent"), chromedp.WaitVisible(chromedp.CSS(form+`[data-testid="grant-tools"]`)), loaded(),
		chromedp.SetValue(chromedp.CSS(form+`[data-testid="grant-tools"]`), "shell_exec"),
		chromedp.Click(chromedp.CSS(form+`[data-testid="grants-submit"]`)),
		chromedp.WaitVisible(tid("error-tools")), loaded(),
	)
	if got := e.text(tid("error-tools")); !strings.Contains(got, "shell_exec") || !strings.Contains(got, "safe") {
		t.Errorf("the grant's error reads %q", got)
	}
	if e.count(form+`input[aria-invalid="true"][data-testid="grant-tools"]`) != 1 {
		t.Error("the tools field is not marked invalid")
	}

	// Two versions: rolling back to the first asks first.
	if r := app.do(t, "admin", "POST", "/api/v1/tools", echoTool("flow_echo", "1.0.0")); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	if r := app.do(t, "admin", "PUT", "/api/v1/tools/flow_echo", echoTool("flow_echo", "1.1.0")); r.Status != 200 && r.Status != 201 {
		t.Fatalf("publish 1.1.0: %d %s", r.Status, r.Body)
	}
	e.run("open the tool", chromedp.Navigate(e.URL+"/admin/tools/flow_echo"), chromedp.WaitVisible(tid("rollback-open-1.0.0")), loaded())
	if e.visible(`[data-testid="rollback"]`) {
		t.Fatal("the roll-back button shows before its confirmation is opened")
	}
	e.run("confirm the roll-back",
		chromedp.Click(tid("rollback-open-1.0.0")), chromedp.WaitVisible(tid("rollback")),
		chromedp.Click(tid("rollback")), chromedp.WaitVisible(tid("notice")), loaded(),
	)
	if got := e.text(tid("notice")); !strings.Contains(got, "Version 1.0.0 of flow_echo is current again") {
		t.Errorf("the roll-back's notice reads %q", got)
	}
	if got := e.text(tid("tool-version")); got != "v1.0.0" {
		t.Errorf("after the roll-back the tool shows %q", got)
	}
}

// TestE2ETryItAndKeys: a try-it form's long text is a multi-line field
// where Enter makes a new line, not a submission; the result's call id
// opens the call. A key issued with a label and an expiry shows both.
func TestE2ETryItAndKeys(t *testing.T) {
	app := newTestApp(t)
	e := newE2E(t, app)
	e.signIn("admin")
	e.run("file_write's try-it form", chromedp.Navigate(e.URL+"/admin/tools/file_write"), chromedp.WaitVisible(tid("try-content")), loaded())
	tag, err := chromedp.Run(e.ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="try-content"]').tagName`))
	if err != nil || tag != "TEXTAREA" {
		t.Fatalf("content is a %q (%v), want a multi-line field", tag, err)
	}
	e.run("two lines, Enter between them",
		chromedp.SendKeys(tid("try-path"), "two-lines.txt"),
		chromedp.SendKeys(tid("try-content"), "first line\rsecond line"),
	)
	if got, err := chromedp.Run(e.ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="try-content"]').value`)); err != nil || got != "first line\nsecond line" {
		t.Fatalf("after Enter the field holds %q (%v): Enter submitted the form, or made no line", got, err)
	}
	e.run("run it", chromedp.Click(tid("try-run")), chromedp.WaitVisible(tid("try-call-link")), loaded())
	if got := e.text(tid("try-status")); got != "succeeded" {
		t.Fatalf("try status %q", got)
	}
	id := e.text(tid("try-call-id"))
	e.run("open the call", chromedp.Click(tid("try-call-link")), chromedp.WaitVisible(tid("call-id")), loaded())
	if got := e.text(tid("call-id")); got != id || e.text(tid("call-tool")) != "file_write" {
		t.Errorf("the call link opened call %q of %q, want %q", got, e.text(tid("call-tool")), id)
	}

	row := `[data-testid="principal-test-agent"] `
	e.run("issue a labelled key with an expiry",
		chromedp.Navigate(e.URL+"/admin/access?q=test-agent"), chromedp.WaitVisible(chromedp.CSS(row+`[data-testid="key-label"]`)), loaded(),
		chromedp.SendKeys(chromedp.CSS(row+`[data-testid="key-label"]`), "nightly report"),
		chromedp.SetValue(chromedp.CSS(row+`[data-testid="key-expires"]`), "2099-01-31"),
		chromedp.Click(chromedp.CSS(row+`[data-testid="issue-key"]`)), chromedp.WaitVisible(tid("new-key")), loaded(),
		chromedp.Click(tid("back-to-access")), chromedp.WaitVisible(chromedp.CSS(row+`[data-testid="keys"]`)), loaded(),
	)
	keys := e.text(chromedp.CSS(row + `[data-testid="keys"] tbody`))
	if !strings.Contains(keys, "nightly report") || !strings.Contains(keys, "2099-01-31") {
		t.Errorf("the agent's keys read %q, want the label and the expiry", keys)
	}
	// Deleting asks first; then the principal is gone and its key with it.
	if e.visible(`[data-testid="principal-test-agent"] [data-testid="delete"]`) {
		t.Fatal("the delete button shows before its confirmation is opened")
	}
	e.run("delete the agent",
		chromedp.Click(chromedp.CSS(row+`[data-testid="delete-open"]`)), chromedp.WaitVisible(chromedp.CSS(row+`[data-testid="delete"]`)),
		chromedp.Click(chromedp.CSS(row+`[data-testid="delete"]`)), chromedp.WaitVisible(tid("notice")), loaded(),
	)
	if n := e.count(`[data-testid="principal-test-agent"]`); n != 0 {
		t.Errorf("the deleted agent is still listed (%d)", n)
	}
	if keyWorks(t, app, app.keys["agent"]) != 401 {
		t.Error("the deleted agent's key still works")
	}
}

// TestE2EPlaygroundFormatAndFeedback: the playground renders the tools in
// the format chosen there, and "Fits the task" teaches the ranking: the
// task becomes a learned query of the tool, listed on its page.
func TestE2EPlaygroundFormatAndFeedback(t *testing.T) {
	app := newTestApp(t)
	e := newE2E(t, app)
	e.signIn("admin")
	const task = "copy the quarterly numbers into notes"
	e.run("ask in the Anthropic format",
		chromedp.Navigate(e.URL+"/admin/playground"), chromedp.WaitVisible(tid("playground-form")), loaded(),
		chromedp.SendKeys(chromedp.CSS("#pg-query"), task),
		chromedp.SetValue(chromedp.CSS("#pg-format"), "anthropic"),
		chromedp.Click(tid("playground-submit")), chromedp.WaitVisible(tid("ranked")), loaded(),
	)
	rendering, err := chromedp.Run(e.ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="ranked-rendering"]').textContent`))
	if err != nil || !strings.Contains(rendering, `"input_schema"`) {
		t.Fatalf("the rendering is not Anthropic's (%v): %.200s", err, rendering)
	}
	tool := e.text(tid("ranked-name")) // the first tool ranked
	fits := chromedp.CSS(`[data-testid="feedback-` + tool + `"] button`)
	e.run(tool+" fits the task", chromedp.Click(fits), chromedp.WaitVisible(tid("notice")), loaded())
	e.run(tool+"'s learned queries", chromedp.Navigate(e.URL+"/admin/tools/"+tool), chromedp.WaitVisible(chromedp.CSS("#h-learned")), loaded())
	learned, err := chromedp.Run(e.ctx, chromedp.Evaluate[string](`document.querySelector('section[aria-labelledby="h-learned"]').innerText`))
	if err != nil || !strings.Contains(learned, task) {
		t.Errorf("%s's learned queries read %q (%v), want the task", tool, learned, err)
	}
}

// TestE2EFileManagedTool: in Chromium, a tool that a tool file registered
// says so on its page, naming the file, and a tool registered by hand
// does not.
func TestE2EFileManagedTool(t *testing.T) {
	app, file := newTestAppWithToolFile(t)
	e := newE2E(t, app)
	e.signIn("admin")
	e.run("the file's tool", chromedp.Navigate(e.URL+"/admin/tools/note_words"), chromedp.WaitVisible(tid("file-managed")), loaded())
	if got := e.text(tid("file-managed")); !strings.Contains(got, file) || !strings.Contains(got, "Edit the file instead") {
		t.Errorf("the file-managed mark reads %q", got)
	}
	e.run("a built-in tool", chromedp.Navigate(e.URL+"/admin/tools/file_read"), chromedp.WaitVisible(tid("tool-name")), loaded())
	if n := e.count(`[data-testid="file-managed"]`); n != 0 {
		t.Errorf("a built-in tool is marked file-managed (%d)", n)
	}
}

// TestE2EDashboardRefreshes: the dashboard's live section refreshes
// itself, without the page reloading, and shows calls made since. (The
// test shortens its 30 s interval to 1 s and lets htmx read it again: the
// same request, selection and swap.)
func TestE2EDashboardRefreshes(t *testing.T) {
	app := newTestApp(t)
	app.call(t, "admin", map[string]any{"tool": "file_write", "session_id": "live", "arguments": map[string]any{"path": "a.txt", "content": "hi"}})
	e := newE2E(t, app)
	e.signIn("admin")
	e.run("the dashboard", chromedp.Navigate(e.URL+"/admin"), chromedp.WaitVisible(tid("stat-calls-value")), loaded())
	before := e.text(tid("stat-calls-value"))
	if _, err := chromedp.Run(e.ctx, chromedp.Evaluate[any](`window.__sameDocument = true;
		const live = document.querySelector('[data-testid="dash-live"]');
		live.setAttribute("hx-trigger", "every 1s"); htmx.process(live); true`)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		app.call(t, "admin", map[string]any{"tool": "file_read", "session_id": "live", "arguments": map[string]any{"path": "a.txt", "max_bytes": 10}})
	}
	e.run("wait for the refresh", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Poll[bool](`document.querySelector('[data-testid="stat-calls-value"]').textContent.trim() !== `+strconv.Quote(before))(ctx, tg)
		return err
	}))
	after := e.text(tid("stat-calls-value"))
	same, err := chromedp.Run(e.ctx, chromedp.Evaluate[bool](`window.__sameDocument === true`))
	if err != nil || !same {
		t.Errorf("the page reloaded to refresh (%v)", err)
	}
	if b, _ := strconv.Atoi(before); after != strconv.Itoa(b+3) {
		t.Errorf("calls went from %s to %s, want %d", before, after, b+3)
	}
}

// TestE2EAgentTryItWaits: an agent's try-it call that waits for a reviewer
// links to its own call page, which the agent may open, never to the
// approval queue, which it may not.
func TestE2EAgentTryItWaits(t *testing.T) {
	app := newTestApp(t)
	dangerousWrite(t, app)
	e := newE2E(t, app)
	e.signIn("agent")
	e.run("try a dangerous tool",
		chromedp.Navigate(e.URL+"/admin/tools/overwrite_note"), chromedp.WaitVisible(tid("try-path")), loaded(),
		chromedp.SendKeys(tid("try-path"), "n.txt"), chromedp.SendKeys(tid("try-content"), "x"),
		chromedp.Click(tid("try-run")), chromedp.WaitVisible(tid("try-awaiting")), loaded(),
	)
	id := e.text(tid("try-call-id"))
	e.run("follow the link", chromedp.Click(chromedp.CSS(`[data-testid="try-awaiting"] a`)), chromedp.WaitVisible(tid("call-id")), loaded())
	if got := e.text(tid("call-id")); got != id {
		t.Errorf("the link opened call %q, want %q", got, id)
	}
	if got := e.text(tid("call-status")); !strings.Contains(got, "approval") {
		t.Errorf("the waiting call's page says %q", got)
	}
}

// TestE2EDashboardOutcomes: in Chromium, calls waiting for a reviewer are
// open, not failed, and a tool whose calls all wait has no success rate
// yet; a rising failure rate is shown against a baseline; an hour's bar
// opens History with that hour's calls.
func TestE2EDashboardOutcomes(t *testing.T) {
	app := newTestApp(t)
	for range 2 {
		if code, res := app.call(t, "admin", map[string]any{"tool": "shell_exec", "arguments": map[string]any{"command": "ls"}}); code != 202 {
			t.Fatalf("shell call: %d %v", code, res)
		}
	}
	now := time.Now().UTC()
	var calls []*models.Call
	for i := range 20 { // web_search fine two hours ago…
		calls = append(calls, &models.Call{ID: fmt.Sprintf("old%02d", i), Tool: "web_search", Status: "succeeded", TotalMs: 40,
			CreatedAt: now.Add(-2*time.Hour - time.Duration(i)*time.Minute)})
	}
	for i := range 6 { // …and failing in the last one
		calls = append(calls, &models.Call{ID: fmt.Sprintf("new%02d", i), Tool: "web_search", Status: "failed", ErrorCode: "UPSTREAM_ERROR",
			TotalMs: 900, CreatedAt: now.Add(-time.Duration(i+1) * time.Minute)})
	}
	if err := app.store.SaveCalls(context.Background(), calls); err != nil {
		t.Fatal(err)
	}
	e := newE2E(t, app)
	e.signIn("admin")
	e.run("the dashboard", chromedp.Navigate(e.URL+"/admin"), chromedp.WaitVisible(tid("stat-open")), loaded())
	if got := e.text(tid("stat-open")); got != "2 open" {
		t.Errorf("open calls %q, want 2 open", got)
	}
	if got := e.text(chromedp.CSS(`[data-testid="top-shell_exec"] [data-testid="top-success"]`)); got != "–" {
		t.Errorf("the success rate of a tool whose calls all wait reads %q", got)
	}
	rising := strings.Join(strings.Fields(e.text(tid("rising-web_search"))), " ")
	if !strings.Contains(rising, "100.0% failed in the last hour (6 of 6)") || !strings.Contains(rising, "0.0% before (0 of 20)") {
		t.Errorf("the rising failure reads %q", rising)
	}
	if n := e.count(`[data-testid="rising-shell_exec"]`); n != 0 {
		t.Errorf("waiting calls flagged as failing (%d)", n)
	}
	// The bar of the hour two hours ago holds web_search's 20 successes
	// (some may fall in the hour before: the bar with the most).
	href, err := chromedp.Run(e.ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('[data-testid="chart-hour"]')]
		.sort((a, b) => (+b.dataset.succeeded || 0) - (+a.dataset.succeeded || 0))[0].getAttribute("href")`))
	if err != nil || !strings.HasPrefix(href, "/admin/calls?") {
		t.Fatalf("the busiest hour's bar links to %q (%v)", href, err)
	}
	want, err := chromedp.Run(e.ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('[data-testid="chart-hour"]')]
		.sort((a, b) => (+b.dataset.succeeded || 0) - (+a.dataset.succeeded || 0))[0].dataset.succeeded`))
	if err != nil {
		t.Fatal(err)
	}
	e.run("open the hour", chromedp.Click(chromedp.CSS(`[data-testid="chart-hour"][href="`+href+`"]`)), chromedp.WaitVisible(tid("call-row")), loaded())
	if n := e.count(`[data-testid="call-row"]`); strconv.Itoa(n) != want {
		t.Errorf("History from the bar lists %d calls, the bar counted %s", n, want)
	}
	// A tool's count opens its calls.
	e.run("open web_search's calls", chromedp.Navigate(e.URL+"/admin"), chromedp.WaitVisible(tid("top-web_search")), loaded(),
		chromedp.Click(chromedp.CSS(`[data-testid="top-web_search"] [data-testid="top-calls"]`)), chromedp.WaitVisible(tid("call-row")), loaded())
	all, err := chromedp.Run(e.ctx, chromedp.Evaluate[bool](`[...document.querySelectorAll('[data-testid="call-row"]')].every(r => r.textContent.includes("web_search"))`))
	if n := e.count(`[data-testid="call-row"]`); err != nil || n != 26 || !all {
		t.Errorf("web_search's count opens %d calls, all of it: %v (%v); want its 26", n, all, err)
	}
}
