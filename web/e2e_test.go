package web_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"toolbelt/services/browser"
)

// e2e drives the console in headless Chromium against the real server on
// 127.0.0.1. On failure it saves a screenshot of the page as it was, in
// $TOOLBELT_E2E_ARTIFACTS (default: the system temp directory), and logs
// its path.
type e2e struct {
	t   *testing.T
	app *testApp
	URL string
	ctx context.Context
}

func newE2E(t *testing.T, app *testApp) *e2e {
	t.Helper()
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	return newE2EAt(t, app, srv.URL)
}

// newE2EAt is newE2E for a server the test started, at url.
func newE2EAt(t *testing.T, app *testApp, url string) *e2e {
	t.Helper()
	path, err := browser.Find(os.Getenv("TOOLBELT_CHROMIUM"))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Chromium missing in CI: %v", err)
		}
		t.Skip(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", "new"),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("no-sandbox", os.Geteuid() == 0),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browserCtx, cancelCtx := chromedp.NewContext(actx)
	// The first run starts the browser; it must not carry a deadline.
	if err := chromedp.Do(browserCtx); err != nil {
		cancelCtx()
		cancelAlloc()
		t.Fatalf("start Chromium: %v", err)
	}
	ctx, cancelTimeout := context.WithTimeout(browserCtx, 90*time.Second)
	e := &e2e{t: t, app: app, URL: url, ctx: ctx}
	t.Cleanup(func() {
		if t.Failed() {
			e.screenshot()
		}
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	return e
}

// screenshot saves the current page.
func (e *e2e) screenshot() {
	dir := os.Getenv("TOOLBELT_E2E_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "toolbelt-e2e")
	}
	_ = os.MkdirAll(dir, 0o755)
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		e.t.Logf("screenshot failed: %v", err)
		return
	}
	file := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(e.t.Name())+".png")
	if err := os.WriteFile(file, png, 0o644); err == nil {
		e.t.Logf("screenshot of the failing page: %s", file)
	}
}

// run runs chromedp actions and fails the test on error, naming what it
// was doing.
func (e *e2e) run(what string, steps ...chromedp.Action[chromedp.Void]) {
	e.t.Helper()
	if err := chromedp.Do(e.ctx, steps...); err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

// loaded waits until the current document has finished loading: after a
// click that navigates, the new page's nodes can otherwise be replaced
// while the next step uses them.
func loaded() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Poll[bool](`document.readyState === "complete"`)(ctx, t)
		return err
	})
}

// visible says whether the element the CSS selector sel names is shown.
func (e *e2e) visible(sel string) bool {
	e.t.Helper()
	shown, err := chromedp.Run(e.ctx, chromedp.Evaluate[bool](`document.querySelector(`+strconv.Quote(sel)+`).checkVisibility()`))
	if err != nil {
		e.t.Fatalf("is %s shown: %v", sel, err)
	}
	return shown
}

// count is the number of elements the CSS selector sel names.
func (e *e2e) count(sel string) int {
	e.t.Helper()
	n, err := chromedp.Run(e.ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(sel)+`).length`))
	if err != nil {
		e.t.Fatalf("count %s: %v", sel, err)
	}
	return n
}

// tid is the CSS selector of a data-testid.
func tid(id string) chromedp.CSS { return chromedp.CSS(`[data-testid="` + id + `"]`) }

// signIn signs in through the form with the key of role.
func (e *e2e) signIn(role string) {
	e.t.Helper()
	e.run("sign in as "+role,
		chromedp.Navigate(e.URL+"/admin"),
		chromedp.WaitVisible(tid("sign-in-form")),
		chromedp.SendKeys(chromedp.CSS("#key"), e.app.keys[role]),
		chromedp.Click(tid("sign-in")),
		chromedp.WaitVisible(tid("user")),
		loaded(),
	)
}

// text returns the text of the first element matching a selector.
func (e *e2e) text(sel chromedp.CSS) string {
	e.t.Helper()
	s, err := chromedp.Run(e.ctx, chromedp.Text(sel, chromedp.NodeVisible))
	if err != nil {
		e.t.Fatalf("read %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

func TestE2ESignInAndOut(t *testing.T) {
	app := newTestApp(t)
	e := newE2E(t, app)
	// A wrong key shows its error beside the field.
	e.run("wrong key",
		chromedp.Navigate(e.URL+"/admin"),
		chromedp.WaitVisible(tid("sign-in-form")),
		chromedp.SendKeys(chromedp.CSS("#key"), "tb_not-a-real-key-at-all"),
		chromedp.Click(tid("sign-in")),
		chromedp.WaitVisible(tid("error-key")),
	)
	if got := e.text(tid("error-key")); !strings.Contains(got, "not valid") {
		t.Fatalf("error %q", got)
	}
	e.signIn("admin")
	if got := e.text(tid("role")); got != "admin" {
		t.Fatalf("role %q", got)
	}
	e.run("sign out", chromedp.Click(tid("sign-out")), chromedp.WaitVisible(tid("sign-in-form")))
}
