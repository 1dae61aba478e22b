package web

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
	)
	// An empty task: the error beside the field, no result.
	e.run("submit without a task",
		chromedp.Click(tid("playground-submit")),
		chromedp.WaitVisible(tid("error-query")),
	)
	if got := e.text(tid("error-query")); !strings.Contains(got, "Describe the task") {
		t.Fatalf("error %q", got)
	}
	e.run("ask for file tools",
		chromedp.SendKeys(chromedp.CSS("#pg-query"), "read a file"),
		chromedp.SetValue(chromedp.CSS("#pg-limit"), "5"),
		chromedp.Click(tid("playground-submit")),
		chromedp.WaitVisible(tid("ranked")),
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
