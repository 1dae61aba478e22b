package web

import (
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
)

// sumAttr adds up an integer attribute over a selection.
func sumAttr(t *testing.T, s *goquery.Selection, attr string) int {
	t.Helper()
	total := 0
	s.Each(func(_ int, e *goquery.Selection) {
		v, _ := e.Attr(attr)
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("%s=%q is not a number", attr, v)
		}
		total += n
	})
	return total
}

// The dashboard's figures are those of the calls made through the API.
func TestConsoleDashboardCountsCalls(t *testing.T) {
	app := newTestApp(t)
	b := signedIn(t, app, "admin")

	// Before any call: zeros, an empty chart of 24 hours, no top tools.
	p := b.get("/admin")
	if p.Status != 200 || p.TestID("stat-calls-value").Text() != "0" || p.TestID("chart-hour").Length() != 24 || p.TestID("top-empty").Length() != 1 {
		t.Fatalf("empty dashboard: %d calls %q hours %d", p.Status, p.TestID("stat-calls-value").Text(), p.TestID("chart-hour").Length())
	}

	calls := []struct {
		body       map[string]any
		wantStatus int
		wantOK     bool
	}{
		{map[string]any{"tool": "file_write", "session_id": "d1", "arguments": map[string]any{"path": "notes/a.txt", "content": "hello"}}, 200, true},
		{map[string]any{"tool": "file_read", "session_id": "d1", "arguments": map[string]any{"path": "notes/a.txt"}}, 200, true},
		{map[string]any{"tool": "file_read", "session_id": "d1", "arguments": map[string]any{"path": "notes/a.txt"}}, 200, true},
		{map[string]any{"tool": "file_read", "session_id": "d1", "arguments": map[string]any{"path": "notes/a.txt"}}, 200, true},
		{map[string]any{"tool": "file_read", "session_id": "d2", "arguments": map[string]any{"path": "notes/missing.txt"}}, 200, false},
		{map[string]any{"tool": "file_read", "session_id": "d3", "arguments": map[string]any{"path": "notes/gone.txt"}}, 200, false},
		{map[string]any{"tool": "file_read", "arguments": map[string]any{}}, 422, false},
	}
	for i, c := range calls {
		code, res := app.call(t, "admin", c.body)
		if code != c.wantStatus || res["success"] != c.wantOK {
			t.Fatalf("call %d: %d %v", i, code, res)
		}
	}
	// The history the API lists is what the dashboard counts.
	listed := app.do(t, "admin", "GET", "/api/v1/calls?limit=100", nil).JSON(t)
	if total, _ := listed["total"].(float64); int(total) != len(calls) {
		t.Fatalf("the API lists %v calls, want %d", listed["total"], len(calls))
	}

	p = b.get("/admin")
	if got := p.TestID("stat-calls-value").Text(); got != "7" {
		t.Errorf("calls %q, want 7", got)
	}
	if got := p.TestID("stat-success-value").Text(); got != "57.1%" {
		t.Errorf("success rate %q, want 57.1%% (4 of 7)", got)
	}
	if got := strings.Join(strings.Fields(p.TestID("stat-calls").Text()), " "); !strings.Contains(got, "4 succeeded · 3 failed") {
		t.Errorf("calls card %q", got)
	}
	hours := p.TestID("chart-hour")
	if hours.Length() != 24 || sumAttr(t, hours, "data-succeeded") != 4 || sumAttr(t, hours, "data-failed") != 3 {
		t.Errorf("chart: %d hours, %d succeeded, %d failed", hours.Length(), sumAttr(t, hours, "data-succeeded"), sumAttr(t, hours, "data-failed"))
	}
	if p.Doc.Find(`svg.chart rect.bar.fail`).Length() != 1 || p.Doc.Find(`svg.chart rect.bar`).Length() != 2 {
		t.Errorf("the chart draws %d bars", p.Doc.Find(`svg.chart rect.bar`).Length())
	}
	if p.Doc.Find("svg.chart title#chart-title").Length() != 1 || !strings.Contains(p.Doc.Find("svg.chart desc").Text(), "7 calls finished") {
		t.Errorf("chart description %q", p.Doc.Find("svg.chart desc").Text())
	}
	if !strings.Contains(p.TestID("chart-summary").Text(), "4 succeeded and 3 failed") {
		t.Errorf("chart summary %q", p.TestID("chart-summary").Text())
	}
	top := p.TestID("top-tools").Find("tbody tr")
	if top.Length() != 2 || top.First().AttrOr("data-testid", "") != "top-file_read" || top.First().Find(`[data-testid="top-calls"]`).Text() != "6" {
		t.Errorf("top tools: %d rows, first %q", top.Length(), top.First().Text())
	}
	if p.TestID("category-filesystem").Find(".stat").Text() == "0" {
		t.Error("no filesystem tools counted")
	}
	if p.TestID("embedder").Text() == "" || p.TestID("sandbox").Length() != 1 {
		t.Error("the embedder and sandbox in use are not shown")
	}
	// The pending count links to the queue when the navigation offers it
	// (the approvals page is another area of the console).
	want := ""
	if p.TestID("nav-Approvals").Length() == 1 {
		want = "/admin/approvals"
	}
	if href, _ := p.TestID("stat-approvals-value").Attr("href"); href != want || p.TestID("stat-approvals-value").Text() != "0" {
		t.Errorf("approvals link %q %q, want %q", href, p.TestID("stat-approvals-value").Text(), want)
	}
	// An agent sees the count but no link to a queue it may not open.
	if p := signedIn(t, app, "agent").get("/admin"); p.Status != 200 || p.TestID("stat-approvals-value").Is("a") {
		t.Errorf("agent dashboard: %d", p.Status)
	}
}
