package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestE2EAdminAuditTrail: an admin creates an agent, grants it a
// category, revokes its key and disables it, each destructive step behind
// its confirmation, then opens the audit log and reads those changes
// there, newest first, as theirs and made in the console.
func TestE2EAdminAuditTrail(t *testing.T) {
	app := newTestApp(t)
	e := newE2E(t, app)
	e.signIn("admin")
	in := func(id string) chromedp.CSS {
		return chromedp.CSS(`[data-testid="principal-e2e-bot"] [data-testid="` + id + `"]`)
	}
	e.run("create an agent",
		chromedp.Navigate(e.URL+"/admin/access"), chromedp.WaitVisible(tid("create-principal")), loaded(),
		chromedp.SendKeys(chromedp.CSS("#acc-name"), "e2e-bot"),
		chromedp.Click(tid("create-submit")), chromedp.WaitVisible(tid("key-shown")), loaded(),
		chromedp.Navigate(e.URL+"/admin/access?q=e2e-bot"), chromedp.WaitVisible(in("grants-form")), loaded())
	e.run("grant it the filesystem tools",
		chromedp.Click(in("grant-filesystem")), dropNotice(), chromedp.Click(in("grants-submit")), chromedp.WaitVisible(tid("notice")), loaded())
	if got := e.text(tid("notice")); !strings.Contains(got, "Grants saved") {
		t.Fatalf("grants notice %q", got)
	}
	if e.visible(`[data-testid="principal-e2e-bot"] [data-testid="revoke"]`) {
		t.Fatal("the revoke button shows before its confirmation is opened")
	}
	e.run("revoke its key",
		chromedp.Click(in("revoke-open")), chromedp.WaitVisible(in("revoke")), dropNotice(), chromedp.Click(in("revoke")),
		chromedp.WaitVisible(tid("notice")), loaded())
	if got := e.text(tid("notice")); !strings.Contains(got, "revoked") {
		t.Fatalf("revoke notice %q", got)
	}
	if e.visible(`[data-testid="principal-e2e-bot"] [data-testid="disable"]`) {
		t.Fatal("the disable button shows before its confirmation is opened")
	}
	e.run("disable it",
		chromedp.Click(in("disable-open")), chromedp.WaitVisible(in("disable")), dropNotice(), chromedp.Click(in("disable")),
		chromedp.WaitVisible(tid("notice")), loaded())
	if got := e.text(tid("notice")); !strings.Contains(got, "e2e-bot disabled") {
		t.Fatalf("disable notice %q", got)
	}
	if got := e.text(in("principal-state")); !strings.Contains(got, "disabled") {
		t.Errorf("state %q", got)
	}
	e.run("open the audit log from the navigation",
		chromedp.Click(chromedp.CSS(`nav a[href="/admin/audit"]`)), chromedp.WaitVisible(tid("audit")), loaded())
	rows, err := chromedp.Run(e.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid="audit-row"]')].slice(0, 4).map(r => r.innerText.replace(/\s+/g, " "))`))
	if err != nil || len(rows) != 4 {
		t.Fatalf("audit rows %v (%v)", rows, err)
	}
	for i, want := range []string{"principal.disable", "key.revoke", "grants.set", "principal.create"} {
		if !strings.Contains(rows[i], want) || !strings.Contains(rows[i], "admin") || !strings.Contains(rows[i], "console") || !strings.Contains(rows[i], "e2e-bot") {
			t.Errorf("row %d %q, want %s by admin in the console naming e2e-bot", i, rows[i], want)
		}
	}
	e.run("filter by action",
		chromedp.SetValue(chromedp.CSS("#audit-action"), "key.revoke"), chromedp.Click(tid("audit-apply")),
		chromedp.WaitVisible(tid("audit-clear")), loaded())
	n, err := chromedp.Run(e.ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="audit-row"]').length`))
	if err != nil || n != 1 || !strings.Contains(e.text(tid("audit-action")), "key.revoke") {
		t.Errorf("filtered to key.revoke: %d rows (%v)", n, err)
	}
}

// dropNotice removes the page's notice before a form is sent, so waiting
// for a notice waits for the next page's, not this one's.
func dropNotice() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`(() => { document.querySelector('[data-testid="notice"]')?.remove(); return true })()`)(ctx, t)
		return err
	})
}
