package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"toolbelt/web"
)

// cspWatch is the browser's account of Content-Security-Policy violations:
// each document reports its securitypolicyviolation events into
// window.__csp (a script DevTools adds to every new document, before any
// of the page's), and the console's messages are kept, since Chromium also
// logs each refusal there ("Refused to execute inline script because it
// violates the following Content Security Policy directive ...").
type cspWatch struct {
	mu   sync.Mutex
	logs []string
}

// cspRecorder runs in every document before the page's own scripts.
const cspRecorder = `window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
	window.__csp.push(e.effectiveDirective + " blocked " + (e.blockedURI || "?") + " at " + e.sourceFile + ":" + e.lineNumber + " " + JSON.stringify(e.sample));
}, true);`

// watchCSP starts recording violations in the e2e browser.
func (e *e2e) watchCSP() *cspWatch {
	e.t.Helper()
	w := &cspWatch{}
	if _, err := chromedp.Call(e.ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: cspRecorder}); err != nil {
		e.t.Fatalf("add the CSP recorder: %v", err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	e.t.Cleanup(cancel)
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			w.mu.Lock()
			w.logs = append(w.logs, m.String())
			w.mu.Unlock()
		}
	}()
	return w
}

// violations returns what the current document reported, and every console
// message so far that names the policy; it clears the latter.
func (w *cspWatch) violations(e *e2e) []string {
	e.t.Helper()
	// A violation event is queued as a task: give the page's own tasks
	// (htmx processing the document on load) a moment to have run.
	time.Sleep(300 * time.Millisecond)
	got, err := chromedp.Run(e.ctx, chromedp.Evaluate[[]string](`window.__csp || ["the CSP recorder did not run in this document"]`))
	if err != nil {
		e.t.Fatalf("read the CSP violations: %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.logs {
		if strings.Contains(m, "Content Security Policy") {
			got = append(got, "console: "+m)
		}
	}
	w.logs = nil
	return got
}

// visit opens a path and waits until it has loaded.
func (e *e2e) visit(path string) {
	e.t.Helper()
	e.run("open "+path, chromedp.Navigate(e.URL+path), loaded())
}

// TestE2EConsoleCSP loads every console page (signed out, as an admin, and
// as a reviewer for the polling approvals queue), the home page and Swagger
// UI in Chromium under the policies the server sends, and fails on any
// violation the browser reports.
func TestE2EConsoleCSP(t *testing.T) {
	app := newTestApp(t)
	dangerousWrite(t, app)
	callID, approvalID := dangerousCall(t, app, "agent", "under a strict policy")

	e := newE2E(t, app)
	w := e.watchCSP()
	check := func(path string) {
		t.Helper()
		if v := w.violations(e); len(v) != 0 {
			t.Errorf("%s: the browser reported CSP violations:\n  %s", path, strings.Join(v, "\n  "))
		}
	}
	for _, path := range []string{"/", "/admin/login", "/swagger/index.html"} {
		e.visit(path)
		check(path)
	}
	e.run("Swagger UI renders the API", chromedp.WaitVisible(chromedp.CSS(".swagger-ui .opblock")))
	check("/swagger/index.html (rendered)")

	e.signIn("admin")
	check("/admin (after signing in)")
	for _, path := range []string{
		"/admin",
		"/admin/tools",
		"/admin/tools?q=file",
		"/admin/tools/new",
		"/admin/tools/file_read",
		"/admin/tools/overwrite_note",
		"/admin/tools/overwrite_note/edit",
		"/admin/playground",
		"/admin/playground?q=read+a+file",
		"/admin/approvals",
		"/admin/calls",
		"/admin/calls/" + callID,
		"/admin/access",
		"/admin/no-such-page",
	} {
		e.visit(path)
		check(path)
	}

	// The tool page's Copy buttons are shown and work by a script file.
	e.visit("/admin/tools/file_read")
	hidden, err := chromedp.Run(e.ctx, chromedp.Evaluate[[]bool](`Array.from(document.querySelectorAll("button.copy")).map(b => b.hidden)`))
	if err != nil || len(hidden) == 0 || slices.Contains(hidden, true) {
		t.Errorf("the Copy buttons are not shown (%v): hidden %v", err, hidden)
	}

	// The reviewer's queue polls (htmx) without eval.
	e.run("sign out", chromedp.Click(tid("sign-out")), chromedp.WaitVisible(tid("sign-in-form")))
	e.signIn("reviewer")
	e.visit("/admin/approvals")
	e.run("the queue", chromedp.WaitVisible(tid("approval-"+approvalID)))
	_, secondID := dangerousCall(t, app, "agent", "a second call")
	e.run("the queue refreshes itself", chromedp.WaitVisible(tid("approval-"+secondID)))
	check("/admin/approvals (polled)")
	// ... but not while the reviewer is in it (static/console.js).
	e.run("focus a reason", chromedp.Focus(tid("reason-"+approvalID)))
	time.Sleep(500 * time.Millisecond) // a poll sent before the focus has answered
	_, thirdID := dangerousCall(t, app, "agent", "a third call")
	time.Sleep(6 * time.Second) // more than one poll interval
	if n, err := chromedp.Run(e.ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="approval-`+thirdID+`"]').length`)); err != nil || n != 0 {
		t.Errorf("the queue refreshed while a reason had focus (%v, %d)", err, n)
	}
	e.run("leave the queue", chromedp.Blur(tid("reason-"+approvalID)), chromedp.WaitVisible(tid("approval-"+thirdID)))
	check("/admin/approvals (polled after focus)")
}

// The watch above is only worth something if it sees a violation: a page
// with an inline script, an inline style and an event handler, under the
// console's policy, must be reported.
func TestE2ECSPWatchSeesViolations(t *testing.T) {
	app := newTestApp(t)
	e := newE2E(t, app)
	w := e.watchCSP()
	bad := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Security-Policy", web.ConsoleCSP)
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(rw, `<!DOCTYPE html><html><head><style>p{color:red}</style></head>`+
			`<body><p style="color:blue" onclick="alert(1)">inline</p><script>document.title = "ran"</script></body></html>`)
	}))
	defer bad.Close()
	e.run("open the inline page", chromedp.Navigate(bad.URL), loaded())
	v := w.violations(e)
	for _, directive := range []string{"script-src-elem", "style-src-elem", "style-src-attr"} {
		if !slices.ContainsFunc(v, func(s string) bool { return strings.HasPrefix(s, directive+" ") }) {
			t.Errorf("no %s violation reported; got:\n  %s", directive, strings.Join(v, "\n  "))
		}
	}
	if title, _ := chromedp.Run(e.ctx, chromedp.Title()); title == "ran" {
		t.Error("the inline script ran under the policy")
	}
}
