package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// An admin registers a tool in the browser, gets a mistake pointed out
// beside its field, fixes it, finds the tool listed and tries it.
func TestE2ERegisterTool(t *testing.T) {
	app := newTestApp(t)
	e := newE2E(t, app)
	e.signIn("admin")
	e.run("open the list",
		chromedp.Navigate(e.URL+"/admin/tools"),
		chromedp.WaitVisible(tid("register-link")),
	)
	// Follow the register link by its address (Navigate waits for the load).
	link, err := chromedp.Run(e.ctx, chromedp.AttributeValue(tid("register-link"), "href"))
	if err != nil || !link.Exists {
		t.Fatalf("register link: %v %+v", err, link)
	}
	e.run("open the register form",
		chromedp.Navigate(e.URL+link.Value),
		chromedp.WaitVisible(tid("tool-form")),
		loaded(),
	)
	e.run("fill it in with a bad name",
		chromedp.SendKeys(chromedp.CSS("#f-name"), "Echo Back"),
		chromedp.SendKeys(chromedp.CSS("#f-description"), "Answer with the message it was given. Input: message. Output: the same message."),
		chromedp.SetValue(chromedp.CSS("#f-category"), "code"),
		chromedp.SetValue(chromedp.CSS("#f-level"), "safe"),
		chromedp.SetValue(chromedp.CSS("#f-parameters"), `{"type": "object", "properties": {"message": {"type": "string", "description": "What to echo"}}, "required": ["message"]}`),
		chromedp.SetValue(chromedp.CSS("#f-runner_kind"), "builtin"),
		chromedp.WaitVisible(chromedp.CSS("#f-builtin")),
		chromedp.SetValue(chromedp.CSS("#f-builtin"), "echo"),
		chromedp.Click(tid("form-submit")),
		chromedp.WaitVisible(tid("error-name")),
		loaded(),
	)
	if got := e.text(tid("error-name")); !strings.Contains(got, "snake_case") {
		t.Fatalf("name error %q", got)
	}
	if got := e.text(tid("form-problems")); !strings.Contains(got, "1 problem") {
		t.Errorf("summary %q", got)
	}
	kind, err := chromedp.Run(e.ctx, chromedp.Value(chromedp.CSS("#f-runner_kind")))
	if err != nil || kind != "builtin" {
		t.Fatalf("the runner kind was not kept: %q %v", kind, err)
	}
	e.run("fix the name",
		chromedp.Clear(chromedp.CSS("#f-name")),
		chromedp.SendKeys(chromedp.CSS("#f-name"), "echo_back"),
		chromedp.Click(tid("form-submit")),
		chromedp.WaitVisible(tid("notice")),
		loaded(),
	)
	if got := e.text(tid("notice")); !strings.Contains(got, "Registered echo_back 1.0.0") {
		t.Fatalf("notice %q", got)
	}
	// Search the list. The search form is a GET form: its result is the
	// page at that address, opened with Navigate so the test waits for it
	// (a click could leave the submission in flight when the next step
	// navigates).
	e.run("find it in the list",
		chromedp.Navigate(e.URL+"/admin/tools?q=echo_back"),
		chromedp.WaitVisible(tid("tool-echo_back")),
	)
	// Follow the list's link by its address: Navigate waits for the page's
	// load, where a click could race the old document going away.
	href, err := chromedp.Run(e.ctx, chromedp.AttributeValue(chromedp.CSS(`[data-testid="tool-echo_back"] a`), "href"))
	if err != nil || !href.Exists {
		t.Fatalf("the listed tool has no link: %v %+v", err, href)
	}
	e.run("open an export: its copy button shows once the script runs",
		chromedp.Navigate(e.URL+href.Value),
		chromedp.WaitVisible(tid("export-openai")),
		chromedp.Click(chromedp.CSS(`[data-testid="export-openai"] summary`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-copy="export-json-openai"]`)),
		loaded(),
		chromedp.WaitVisible(chromedp.CSS("#export-json-openai")),
	)
	if got := e.text(chromedp.CSS("#export-json-openai")); !strings.Contains(got, `"name": "echo_back"`) {
		t.Errorf("openai export %q", got)
	}
	e.run("try it",
		chromedp.WaitVisible(tid("try-message")),
		chromedp.SendKeys(tid("try-message"), "hello there"),
		chromedp.Click(tid("try-run")),
		chromedp.WaitVisible(tid("try-data")),
		loaded(),
	)
	if got := e.text(tid("try-status")); got != "succeeded" {
		t.Errorf("try status %q", got)
	}
	if got := e.text(tid("try-data")); !strings.Contains(got, "hello there") {
		t.Errorf("try data %q", got)
	}
}

// TestE2ERetireAsksFirst: the Retire button is not on the page until its
// confirmation is opened; confirmed, the tool is retired and can be
// restored from the same page.
func TestE2ERetireAsksFirst(t *testing.T) {
	app := newTestApp(t)
	e := newE2E(t, app)
	e.signIn("admin")
	e.run("open the tool", chromedp.Navigate(e.URL+"/admin/tools/file_list"), chromedp.WaitVisible(tid("retire-open")), loaded())
	if visible, err := chromedp.Run(e.ctx, chromedp.Evaluate[bool](`document.querySelector('[data-testid="retire"]').checkVisibility()`)); err != nil || visible {
		t.Fatalf("the retire button shows before its confirmation is opened (%v)", err)
	}
	e.run("confirm", chromedp.Click(tid("retire-open")), chromedp.WaitVisible(tid("retire")), chromedp.Click(tid("retire")),
		chromedp.WaitVisible(tid("notice")), loaded())
	if got := e.text(tid("notice")); !strings.Contains(got, "file_list is retired") {
		t.Fatalf("notice %q", got)
	}
	e.run("restore", chromedp.Click(tid("restore")), chromedp.WaitVisible(tid("try-form")), loaded())
	if code, _ := app.call(t, "admin", map[string]any{"tool": "file_list"}); code != 200 {
		t.Errorf("restored tool's call: %d", code)
	}
}
