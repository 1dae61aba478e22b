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

// TestE2EPlaygroundExplains: for a task asking for three things the
// playground says, in sentences, what each part found (and what matched
// nothing), which part each tool answers and which words matched, why
// this many tools came back, and warns of a dangerous tool that came
// back on a weak match.
func TestE2EPlaygroundExplains(t *testing.T) {
	app := newTestApp(t)
	for _, d := range []struct{ name, desc, level string }{
		{"search_flights", "Search flights between two cities on a date and list them with their prices.", "safe"},
		{"convert_currency", "Convert an amount of money from one currency to another, e.g. dollars to euros.", "safe"},
		{"add_calendar_event", "Add an event with a title and a time to the user's calendar.", "safe"},
		// Each action opens two tools' names, as in a real catalog.
		{"search_hotels", "Search hotels in a city for given nights and list their rates.", "safe"},
		{"convert_units", "Convert a length, weight or temperature between units.", "safe"},
		{"add_mail_filter", "Add a filter to the mailbox that deletes or moves matching messages.", "dangerous"},
	} {
		def := toolDef(d.name, func(m map[string]any) {
			m["description"] = d.desc
			m["category"] = "api"
			m["security"] = map[string]any{"level": d.level, "sandbox": true}
		})
		if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
			t.Fatalf("register %s: %d %s", d.name, r.Status, r.Body)
		}
	}
	e := newE2E(t, app)
	e.signIn("admin")
	task := "search the flights from Oslo to Rome, convert the price to euros and add the trip to my calendar"
	e.run("ask for a task of three parts", chromedp.Navigate(e.URL+"/admin/playground?category=api&limit=6&q="+strings.ReplaceAll(task, " ", "+")),
		chromedp.WaitVisible(tid("ranked")), loaded())
	intents, err := chromedp.Run(e.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid="intent"]')].map(li => li.textContent.replace(/\s+/g, " ").trim())`))
	if err != nil || len(intents) != 3 {
		t.Fatalf("the parts of the task: %v %v", intents, err)
	}
	for i, want := range []string{"search_flights", "convert_currency", "add_calendar_event"} {
		if !strings.Contains(intents[i], want) {
			t.Errorf("part %d %q does not name %s", i+1, intents[i], want)
		}
	}
	sentences, err := chromedp.Run(e.ctx, chromedp.Evaluate[map[string]string](`Object.fromEntries([...document.querySelectorAll('[data-testid="ranked-tool"]')].map(tr =>
		[tr.dataset.name, tr.querySelector('[data-testid="ranked-sentence"]').textContent.replace(/\s+/g, " ").trim()]))`))
	if err != nil || !strings.Contains(sentences["convert_currency"], "Answers “convert the price to euros”") || !strings.Contains(sentences["convert_currency"], "“euros”") {
		t.Errorf("convert_currency's sentence: %q (%v)", sentences["convert_currency"], err)
	}
	if got := e.text(tid("why-count")); !strings.Contains(got, "limit of 6") || !strings.Contains(got, "categories “api”") {
		t.Errorf("why this many: %q", got)
	}
	if n := e.count(`[data-testid="weak-danger-add_mail_filter"]`); n != 1 {
		t.Errorf("no warning of the dangerous add_mail_filter on a weak match (%d); tools: %v", n, sentences)
	}
	if n := e.count(`[data-testid^="weak-danger-"]`); n != 1 {
		t.Errorf("%d warnings: a safe tool's weak match is no danger", n)
	}
	e.run("a task no tool does", chromedp.Navigate(e.URL+"/admin/playground?category=api&q=translate+this+poem+into+Latin+verse"), chromedp.WaitVisible(tid("why-count")), loaded())
	if got := e.text(tid("unmatched")); !strings.Contains(got, "“latin”") && !strings.Contains(got, "“poem”") {
		t.Errorf("the words no tool knows: %q", got)
	}
}
