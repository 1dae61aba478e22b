package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// An admin asks the playground in a real browser and gets ranked tools.
func TestE2EPlayground(t *testing.T) {
	app := newTestApp(t)
	e := newE2E(t, app)
	e.signIn("admin")
	e.run("open the playground from the navigation",
		chromedp.Click(tid("nav-Playground")),
		chromedp.WaitVisible(tid("playground-form")),
		loaded(),
	)
	// An empty task: the error beside the field, no result.
	e.run("submit without a task",
		chromedp.Click(tid("playground-submit")),
		chromedp.WaitVisible(tid("error-query")),
		loaded(),
	)
	if got := e.text(tid("error-query")); !strings.Contains(got, "Describe the task") {
		t.Fatalf("error %q", got)
	}
	e.run("ask for file tools",
		chromedp.SendKeys(chromedp.CSS("#pg-query"), "read a file"),
		chromedp.SetValue(chromedp.CSS("#pg-limit"), "5"),
		chromedp.Click(tid("playground-submit")),
		chromedp.WaitVisible(tid("ranked")),
		loaded(),
	)
	if got := e.text(tid("ranked-name")); got != "file_read" {
		t.Fatalf("first tool %q, want file_read", got)
	}
	url, err := chromedp.Run(e.ctx, chromedp.Location())
	if err != nil || !strings.Contains(url, "q=read+a+file") || !strings.Contains(url, "limit=5") {
		t.Fatalf("the query is not in the address (%v): %s", err, url)
	}
	if got := e.text(tid("tokens")); !strings.Contains(got, "saved") {
		t.Errorf("token figures %q", got)
	}
}

// An agent opening the access page gets the 403 page inside the console.
func TestE2EAccessForbiddenForAgent(t *testing.T) {
	app := newTestApp(t)
	e := newE2E(t, app)
	e.signIn("agent")
	n, err := chromedp.Run(e.ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="nav-Access"]').length`))
	if err != nil || n != 0 {
		t.Fatalf("the agent's navigation offers Access (%v, %d)", err, n)
	}
	e.run("open /admin/access",
		chromedp.Navigate(e.URL+"/admin/access"),
		chromedp.WaitVisible(tid("error-page")),
	)
	if got := e.text(tid("error-page")); !strings.Contains(got, "403") || !strings.Contains(got, "agent role may not open this page") {
		t.Fatalf("error page %q", got)
	}
	if got := e.text(tid("role")); got != "agent" {
		t.Fatalf("signed in as %q", got)
	}
}

// An admin creates a principal in a real browser, sees its key once, and
// revokes it through the two-step button.
func TestE2EAccessCreateAndRevoke(t *testing.T) {
	app := newTestApp(t)
	e := newE2E(t, app)
	e.signIn("admin")
	e.run("create a principal",
		chromedp.Click(tid("nav-Access")),
		chromedp.WaitVisible(tid("create-principal")),
		loaded(),
		chromedp.SendKeys(chromedp.CSS("#acc-name"), "e2e-bot"),
		chromedp.Click(tid("create-submit")),
		chromedp.WaitVisible(tid("new-key")),
		loaded(),
	)
	key, err := chromedp.Run(e.ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="new-key"]').value`))
	if err != nil || !strings.HasPrefix(key, "tb_") {
		t.Fatalf("key %q (%v)", key, err)
	}
	if keyWorks(t, app, key) != 200 {
		t.Fatal("the key shown does not work")
	}
	// The copy button hands the key itself to the clipboard (headless
	// Chromium grants no clipboard to a page: what the button writes is
	// caught instead).
	if _, err := chromedp.Run(e.ctx, chromedp.Evaluate[any](`navigator.clipboard.writeText = t => { window.__copied = t; return Promise.resolve(); }`)); err != nil {
		t.Fatal(err)
	}
	e.run("copy the key", chromedp.Click(tid("copy-key")))
	if got, err := chromedp.Run(e.ctx, chromedp.Evaluate[string](`window.__copied || ""`)); err != nil || got != key {
		t.Fatalf("the copy button wrote %q (%v), want the key", got, err)
	}
	row := `[data-testid="principal-e2e-bot"] `
	e.run("revoke it",
		chromedp.Click(tid("back-to-access")),
		chromedp.WaitVisible(chromedp.CSS(row+`[data-testid="revoke-open"]`)),
		loaded(),
		chromedp.Click(chromedp.CSS(row+`[data-testid="revoke-open"]`)),
		chromedp.WaitVisible(chromedp.CSS(row+`[data-testid="revoke"]`)),
		loaded(),
		chromedp.Click(chromedp.CSS(row+`[data-testid="revoke"]`)),
		chromedp.WaitVisible(tid("notice")),
		loaded(),
	)
	if got := e.text(chromedp.CSS(row + `[data-testid="key-state"]`)); !strings.Contains(got, "revoked") {
		t.Fatalf("key state %q", got)
	}
	if keyWorks(t, app, key) != 401 {
		t.Fatal("the revoked key still works")
	}
}
