package web_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
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
		chromedp.WaitVisible(tid("tab-exports")),
		chromedp.Click(tid("tab-exports")),
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
		chromedp.Click(tid("tab-try")),
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
	if e.visible(`[data-testid="retire"]`) {
		t.Fatal("the retire button shows before its confirmation is opened")
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

// TestE2EToolPageTabs: the tool page opens on its main action, Try it,
// within the first screen; Definition and Exports are tabs beside it, in
// the ARIA tabs pattern (one panel shown, arrow keys move, the selected
// tab alone in the tab order), and an address naming a panel opens it.
// A reviewer, who cannot try tools, opens on the definition.
func TestE2EToolPageTabs(t *testing.T) {
	app := newTestApp(t)
	e := newE2E(t, app)
	e.signIn("admin")
	e.run("open the tool", chromedp.Navigate(e.URL+"/admin/tools/file_read"), chromedp.WaitVisible(tid("tool-tabs")), loaded())
	shown := func() []string {
		ids, err := chromedp.Run(e.ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("[data-tab-panel]")).filter(p => p.checkVisibility()).map(p => p.id)`))
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	selected := func() string {
		id, err := chromedp.Run(e.ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('[role="tab"][aria-selected="true"]')].map(t => t.id).join(",") + "|" + document.activeElement.id`))
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	if got := shown(); !slices.Equal(got, []string{"try"}) {
		t.Fatalf("panels shown at first: %v, want the try-it form alone", got)
	}
	top, err := chromedp.Run(e.ctx, chromedp.Evaluate[float64](`document.querySelector('[data-testid="try-form"]').getBoundingClientRect().top - window.innerHeight`))
	if err != nil || top >= 0 {
		t.Errorf("the try-it form starts %.0f px below the first screen (%v)", top, err)
	}
	e.run("the keyboard moves between tabs", chromedp.Focus(tid("tab-try")), chromedp.KeyEvent(kb.ArrowRight))
	if got := selected(); got != "tab-definition|tab-definition" {
		t.Errorf("after ArrowRight: selected|focused = %s", got)
	}
	if got := shown(); !slices.Equal(got, []string{"definition"}) {
		t.Errorf("after ArrowRight the panels shown are %v", got)
	}
	if got := e.text(tid("parameters")); !strings.Contains(got, `"path"`) {
		t.Errorf("the definition panel's schema reads %q", got)
	}
	e.run("End, then ArrowRight wraps to the first", chromedp.KeyEvent(kb.End))
	if got := selected(); got != "tab-exports|tab-exports" {
		t.Errorf("after End: %s", got)
	}
	e.run("wrap", chromedp.KeyEvent(kb.ArrowRight))
	if got := selected(); got != "tab-try|tab-try" {
		t.Errorf("after ArrowRight on the last tab: %s", got)
	}
	tabStops, err := chromedp.Run(e.ctx, chromedp.Evaluate[int](`[...document.querySelectorAll('[role="tab"]')].filter(t => t.tabIndex === 0).length`))
	if err != nil || tabStops != 1 {
		t.Errorf("%d tabs in the tab order, want 1 (%v)", tabStops, err)
	}
	e.run("an address naming a panel opens it", chromedp.Navigate(e.URL+"/admin/tools/file_read#exports"), chromedp.WaitVisible(tid("export-openai")), loaded())
	if got := shown(); !slices.Equal(got, []string{"exports"}) {
		t.Errorf("#exports shows %v", got)
	}

	r := newE2E(t, app)
	r.signIn("reviewer")
	r.run("a reviewer's tool page", chromedp.Navigate(r.URL+"/admin/tools/file_read"), chromedp.WaitVisible(tid("tool-tabs")), loaded())
	ids, err := chromedp.Run(r.ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("[data-tab-panel]")).filter(p => p.checkVisibility()).map(p => p.id)`))
	if err != nil || !slices.Equal(ids, []string{"definition"}) {
		t.Errorf("a reviewer sees %v first, want the definition (%v)", ids, err)
	}
}
