package web_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"toolbelt/internal/nodetest"
)

// axeRun runs axe-core over the page against the WCAG 2.2 A and AA rules
// and lists each violation by rule and element.
const axeRun = `axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]}})
  .then(r => r.violations.map(v => v.id + " (" + v.impact + "): " + v.nodes.length + " nodes: " + v.nodes.slice(0, 4).map(n => n.target.join(" ") + (n.any[0] ? " [" + n.any[0].message + "]" : "")).join("; ")))`

// TestE2ESwaggerAccessible: Swagger UI, with an operation opened, passes
// the same axe rules as the console. swagger-ui-dist 4.15.5 failed 106
// elements: contrast and target size, which our stylesheet (index.css)
// fixes; buttons named unlike their text, which 5.35.0 fixes; links nested
// in the operations' buttons and the top bar's unlabelled URL field, which
// our initializer's base layout without deep links removes; and the enum
// parameters' unnamed selects, which it names.
func TestE2ESwaggerAccessible(t *testing.T) {
	axe, err := os.ReadFile(filepath.Join(nodetest.Dir(t), "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	app := newTestApp(t)
	e := newE2E(t, app)
	// The base layout keeps the Authorize button, which Try it out needs.
	e.run("open Swagger UI", chromedp.Navigate(e.URL+"/swagger/index.html"), chromedp.WaitVisible(chromedp.CSS(".opblock-summary")), loaded(),
		chromedp.WaitVisible(chromedp.CSS(".btn.authorize")),
		chromedp.Click(chromedp.CSS(".opblock-summary-control")), chromedp.WaitVisible(chromedp.CSS(".opblock-body")))
	if violations := e.axeViolations(axe); len(violations) > 0 {
		t.Errorf("Swagger UI, %d rules:\n  %s", len(violations), strings.Join(violations, "\n  "))
	}
}

// axeViolations loads axe-core into the current page and runs axeRun.
func (e *e2e) axeViolations(axe []byte) []string {
	e.t.Helper()
	if _, err := chromedp.Run(e.ctx, chromedp.Evaluate[any](string(axe))); err != nil {
		e.t.Fatalf("load axe-core: %v", err)
	}
	violations, err := chromedp.Run(e.ctx, chromedp.Evaluate[[]string](axeRun, chromedp.EvalAwaitPromise))
	if err != nil {
		e.t.Fatal(err)
	}
	return violations
}

// TestE2EAccessibility runs axe-core (testdata/node, pinned by the lock
// file) in Chromium over every console page, with data on them (calls
// that succeeded, failed and were refused, a waiting approval, a key), as
// an admin and as a reviewer, against the WCAG 2.2 A and AA rules:
// contrast, names, labels, landmarks, lists, ARIA. Any violation fails,
// named by rule and element.
func TestE2EAccessibility(t *testing.T) {
	axe, err := os.ReadFile(filepath.Join(nodetest.Dir(t), "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	app := newTestApp(t)
	dangerousWrite(t, app)
	dangerousCall(t, app, "agent", "waiting for the reviewer")
	app.call(t, "admin", map[string]any{"tool": "file_write", "session_id": "a11y", "arguments": map[string]any{"path": "a.txt", "content": "x"}})
	app.call(t, "admin", map[string]any{"tool": "file_read", "session_id": "a11y", "arguments": map[string]any{"path": "missing.txt"}})
	app.call(t, "admin", map[string]any{"tool": "file_read", "arguments": map[string]any{}})
	// A disabled principal, a key with a label and an expiry, and so
	// entries in the audit log.
	bot := app.do(t, "admin", "POST", "/api/v1/principals", map[string]any{"name": "a11y-bot", "role": "agent", "key_label": "ci", "key_expires_at": "2099-01-01T00:00:00Z"}).JSON(t)
	app.do(t, "admin", "POST", "/api/v1/principals/"+itoa(bot["id"])+"/disable", nil)
	callID := app.do(t, "admin", "GET", "/api/v1/calls?limit=1", nil).JSON(t)["calls"].([]any)[0].(map[string]any)["id"].(string)
	// A stored secret, so the secrets page shows its table.
	app.do(t, "admin", "PUT", "/api/v1/me/secrets/GITHUB_TOKEN", map[string]any{"value": "a11y-secret-value-0123"})

	pages := map[string][]string{
		"admin": {"/admin", "/admin/tools", "/admin/tools/file_read", "/admin/tools/new", "/admin/tools/file_read/edit",
			"/admin/playground?q=read+a+file", "/admin/calls", "/admin/calls/" + callID, "/admin/approvals", "/admin/access", "/admin/servers", "/admin/audit", "/admin/audit?action=drop", "/admin/secrets?name=JIRA_TOKEN"},
		"reviewer": {"/admin/approvals"},
	}
	run := axeRun
	// axe does not judge focus indicators: the outline a keyboard user
	// sees must stand 3:1 against the page (WCAG 1.4.11).
	const focusContrast = `(() => {
  const rgb = s => s.match(/[\d.]+/g).slice(0, 3).map(Number);
  const lum = c => { const [r, g, b] = c.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const a = lum(rgb(getComputedStyle(document.activeElement).outlineColor)), b = lum(rgb(getComputedStyle(document.body).backgroundColor));
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
})()`
	for _, role := range []string{"admin", "reviewer"} {
		e := newE2E(t, app)
		e.signIn(role)
		for _, path := range pages[role] {
			e.run("open "+path, chromedp.Navigate(e.URL+path), loaded())
			if _, err := chromedp.Run(e.ctx, chromedp.Evaluate[any](string(axe))); err != nil {
				t.Fatalf("load axe-core: %v", err)
			}
			violations, err := chromedp.Run(e.ctx, chromedp.Evaluate[[]string](run, chromedp.EvalAwaitPromise))
			if err != nil {
				t.Fatalf("%s: axe.run: %v", path, err)
			}
			if len(violations) > 0 {
				t.Errorf("%s as %s:\n  %s", path, role, strings.Join(violations, "\n  "))
			}
			e.run("tab to the first link", chromedp.KeyEvent("\t"))
			if ratio, err := chromedp.Run(e.ctx, chromedp.Evaluate[float64](focusContrast)); err != nil || ratio < 3 {
				t.Errorf("%s: the focus outline stands %.2f:1 against the page, want 3:1 (%v)", path, ratio, err)
			}
		}
	}
}

// TestE2EDashboardNarrow: on a 390 px phone the chart's hour labels keep a
// readable size (the chart scrolls sideways rather than shrink them).
func TestE2EDashboardNarrow(t *testing.T) {
	app := newTestApp(t)
	e := newE2E(t, app)
	e.signIn("admin")
	e.run("open the dashboard at 390 px", chromedp.EmulateViewport(390, 844), chromedp.Navigate(e.URL+"/admin"),
		chromedp.WaitVisible(tid("chart")), loaded())
	px, err := chromedp.Run(e.ctx, chromedp.Evaluate[float64](`Math.min(...[...document.querySelectorAll("svg.chart text")].map(t => t.getBoundingClientRect().height))`))
	if err != nil || px < 9 {
		t.Errorf("the chart's smallest label is %.1f px high at 390 px, want 9 or more (%v)", px, err)
	}
	// It opens on the newest hours: the rightmost label is on the screen.
	newest, err := chromedp.Run(e.ctx, chromedp.Evaluate[[]float64](`(() => {
		const r = [...document.querySelectorAll("svg.chart text")].map(t => t.getBoundingClientRect()).reduce((a, b) => a.right > b.right ? a : b);
		return [r.left, r.right, window.innerWidth];
	})()`))
	if err != nil || len(newest) != 3 || newest[0] < 0 || newest[1] > newest[2] {
		t.Errorf("the newest hour's label at 390 px (left, right, width): %v %v", newest, err)
	}
	// The ranges are a control of separate, padded links, the current one
	// marked.
	ranges, err := chromedp.Run(e.ctx, chromedp.Evaluate[[]float64](`[...document.querySelectorAll(".dash-ranges a")].map(a => parseFloat(getComputedStyle(a).paddingLeft))`))
	if err != nil || len(ranges) != 3 || slices.Min(ranges) < 8 {
		t.Errorf("the range links' padding: %v %v", ranges, err)
	}
	// A refusal has one colour: the chart's key, and History's badge.
	colours, err := chromedp.Run(e.ctx, chromedp.Evaluate[[]string](`(() => {
		document.body.insertAdjacentHTML("beforeend", '<span class="badge refused" id="probe">refused</span>');
		const key = document.querySelector(".dash-key.refused-key");
		return [key ? getComputedStyle(key).backgroundColor : "", getComputedStyle(document.getElementById("probe")).color];
	})()`))
	if err != nil || len(colours) != 2 || colours[0] == "" || colours[0] != colours[1] {
		t.Errorf("refused in the chart's key and in a badge: %v %v", colours, err)
	}
}
