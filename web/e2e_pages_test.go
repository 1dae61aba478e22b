package web_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"toolbelt/services/access"
	"toolbelt/services/tooldef"
)

// consolePages are the pages the console guide shows, with data behind
// them: a few calls (one refused), a call waiting for a reviewer.
func consolePages(t *testing.T, app *testApp) map[string]string {
	t.Helper()
	if code, res := app.call(t, "admin", map[string]any{"tool": "file_write", "session_id": "docs", "arguments": map[string]any{"path": "notes.txt", "content": "hello"}}); code != 200 {
		t.Fatalf("file_write: %d %v", code, res)
	}
	_, res := app.call(t, "admin", map[string]any{"tool": "file_read", "session_id": "docs", "arguments": map[string]any{"path": "notes.txt"}})
	call, _ := res["call_id"].(string)
	app.call(t, "admin", map[string]any{"tool": "file_read", "session_id": "docs", "arguments": map[string]any{"path": "../etc/passwd"}})
	app.call(t, "admin", map[string]any{"tool": "shell_exec", "session_id": "docs", "arguments": map[string]any{"command": "ls -la"}})
	return map[string]string{
		"dashboard":  "/admin",
		"tools":      "/admin/tools",
		"tool":       "/admin/tools/file_read",
		"calls":      "/admin/calls",
		"call":       "/admin/calls/" + call,
		"approvals":  "/admin/approvals",
		"access":     "/admin/access",
		"playground": "/admin/playground",
		"audit":      "/admin/audit",
		"secrets":    "/admin/secrets",
	}
}

// TestE2EPagesFitNarrowScreens: at 390 px (a phone) no console page
// scrolls sideways: wide tables and code scroll inside their own box.
// With TOOLBELT_SCREENSHOTS=<dir> it also saves each page at 1280 px,
// the console guide's pictures (docs/img: make screenshots).
func TestE2EPagesFitNarrowScreens(t *testing.T) {
	app := newTestApp(t)
	pages := consolePages(t, app)
	e := newE2E(t, app)
	e.signIn("admin")
	dir := os.Getenv("TOOLBELT_SCREENSHOTS")
	for name, path := range pages {
		fitsAPhone(t, e, name, path)
		if dir == "" {
			continue
		}
		e.run("open "+name+" at 1280 px", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(e.URL+path), chromedp.WaitVisible(chromedp.CSS("main h1")), loaded())
		shot, err := chromedp.Run(e.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "console-"+name+".png")
		if err := os.WriteFile(file, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s (%d KB)", name, file, len(shot)>>10)
	}
}

// TestE2EPagesFitWithRealisticData: with the data of a real deployment
// (50 tools, 20 more principals, 500 calls over the last hours) every
// console page still fits a 390 px phone without scrolling sideways, and
// the lists stay short enough to scan (each page's height is logged).
func TestE2EPagesFitWithRealisticData(t *testing.T) {
	app := newTestApp(t)
	pages := consolePages(t, app)
	pages["servers"] = "/admin/servers"
	// The lists ordered by their widest columns, with the filters open.
	pages["calls by principal"] = "/admin/calls?sort=-principal&session=s3"
	pages["audit by target"] = "/admin/audit?sort=target&since=2026-01-01T00:00"
	for i := range 42 {
		def := toolDef(fmt.Sprintf("count_words_in_report_section_%02d", i), func(m map[string]any) {
			m["category"] = tooldef.Categories[i%len(tooldef.Categories)]
			m["security"] = map[string]any{"level": tooldef.Levels[i%3], "sandbox": true}
			m["tags"] = []any{"reports", fmt.Sprintf("team-%d", i%4)}
		})
		if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
			t.Fatalf("register: %d %s", r.Status, r.Body)
		}
	}
	principals := []uint{app.ids["admin"], app.ids["agent"]}
	for i := range 20 {
		r := app.do(t, "admin", "POST", "/api/v1/principals", map[string]any{"name": fmt.Sprintf("research-agent-%02d", i), "role": access.Roles[i%3]})
		if r.Status != 201 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		principals = append(principals, uint(r.JSON(t)["id"].(float64)))
	}
	seedCallHistory(t, app, 500, time.Now().UTC(), principals)

	e := newE2E(t, app)
	e.signIn("admin")
	for _, name := range slices.Sorted(maps.Keys(pages)) {
		fitsAPhone(t, e, name, pages[name])
		height, err := chromedp.Run(e.ctx, chromedp.Evaluate[float64](`document.documentElement.scrollHeight`))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s at 390 px: %.0f px high", name, height)
	}
}

// fitsAPhone opens path at 390 px wide and fails t when the page scrolls
// sideways there.
func fitsAPhone(t *testing.T, e *e2e, name, path string) {
	t.Helper()
	e.run("open "+name+" at 390 px", chromedp.EmulateViewport(390, 844), chromedp.Navigate(e.URL+path), chromedp.WaitVisible(chromedp.CSS("main h1")), loaded())
	wide, err := chromedp.Run(e.ctx, chromedp.Evaluate[string](overflowing))
	if err != nil {
		t.Fatal(err)
	}
	if wide != "" {
		t.Errorf("%s (%s) is wider than 390 px: %s", name, path, wide)
	}
}

// overflowing names the elements of the page that reach past the
// viewport's right edge, other than those inside a box that scrolls or
// clips them ("" when none): what makes a page scroll sideways.
const overflowing = `(() => {
	const vw = document.documentElement.clientWidth;
	const clipped = el => {
		for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
			if (getComputedStyle(p).overflowX !== "visible") return true;
		}
		return false;
	};
	const out = [...document.body.querySelectorAll("*")].filter(el => {
		const r = el.getBoundingClientRect();
		return r.width > 0 && r.right > vw + 1 && !clipped(el);
	});
	// The outermost ones: their children are no news.
	const top = out.filter(el => !out.some(o => o !== el && o.contains(el)));
	return top.slice(0, 4).map(el => el.tagName.toLowerCase() + (el.className ? "." + String(el.className).trim().split(/\s+/)[0] : "") +
		(el.dataset.testid ? "[" + el.dataset.testid + "]" : "") + " to " + Math.round(el.getBoundingClientRect().right) + " px").join(", ");
})()`
