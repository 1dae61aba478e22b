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

// The playground ranks the catalog as the API does and puts each input
// error next to its field.
func TestConsolePlayground(t *testing.T) {
	app := newTestApp(t)
	b := signedIn(t, app, "admin")

	p := b.get("/admin/playground")
	if p.Status != 200 || p.TestID("playground-form").Length() != 1 || p.TestID("playground-result").Length() != 0 {
		t.Fatalf("first visit: %d", p.Status)
	}
	if p.TestID("category-filesystem").Length() != 1 || p.TestID("nav-Playground").AttrOr("aria-current", "") != "page" {
		t.Fatal("no category checkboxes or the navigation does not mark the page")
	}

	p = b.get("/admin/playground?q=read+a+file&limit=5")
	if p.Status != 200 {
		t.Fatalf("query: %d", p.Status)
	}
	ranked := p.TestID("ranked-tool")
	if ranked.Length() == 0 || ranked.Length() > 5 {
		t.Fatalf("%d tools ranked, want 1 to 5", ranked.Length())
	}
	if first := ranked.First().AttrOr("data-name", ""); first != "file_read" {
		t.Errorf("first tool %q, want file_read", first)
	}
	if ranked.First().Find(`[data-testid="ranked-score"]`).Text() == "" || !strings.Contains(ranked.First().Text(), "lexical") {
		t.Error("no score or reasons")
	}
	sel, _ := strconv.Atoi(p.TestID("tokens-selection").Text())
	cat, _ := strconv.Atoi(p.TestID("tokens-catalog").Text())
	if sel <= 0 || cat <= sel {
		t.Errorf("tokens: selection %d of catalog %d", sel, cat)
	}
	// The API agrees on the order.
	api := app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": "read a file", "limit": 5}).JSON(t)
	apiTools := api["tools"].([]any)
	if len(apiTools) != ranked.Length() || apiTools[0].(map[string]any)["name"] != "file_read" {
		t.Errorf("the API selects %d tools, the playground %d", len(apiTools), ranked.Length())
	}

	// A category filter keeps only that category.
	p = b.get("/admin/playground?q=read+a+file&limit=10&category=shell")
	p.TestID("ranked-tool").Each(func(_ int, s *goquery.Selection) {
		if !strings.Contains(s.Text(), "shell") {
			t.Errorf("%s is not a shell tool", s.AttrOr("data-name", ""))
		}
	})
	if p.Doc.Find(`input[name="category"][value="shell"][checked]`).Length() != 1 || p.Doc.Find(`input[name="category"][checked]`).Length() != 1 {
		t.Error("the checked category is not kept")
	}

	for _, tc := range []struct {
		name, query, field, want string
	}{
		{"empty query", "q=&limit=5", "error-query", "Describe the task"},
		{"blank query", "q=+++&limit=5", "error-query", "Describe the task"},
		{"limit zero", "q=read&limit=0", "error-limit", "between 1 and 40"},
		{"limit too big", "q=read&limit=51", "error-limit", "between 1 and 40"},
		{"limit not a number", "q=read&limit=ten", "error-limit", "whole number"},
		{"unknown category", "q=read&limit=5&category=nope", "error-categories", "not a category"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := b.get("/admin/playground?" + tc.query)
			if p.Status != 422 || !strings.Contains(p.TestID(tc.field).Text(), tc.want) || p.TestID("playground-result").Length() != 0 {
				t.Fatalf("%d %s=%q", p.Status, tc.field, p.TestID(tc.field).Text())
			}
			if tc.field != "error-categories" {
				id := strings.TrimPrefix(tc.field, "error-")
				if v, _ := p.Doc.Find("#pg-" + id).Attr("aria-invalid"); v != "true" {
					t.Errorf("#pg-%s is not marked invalid", id)
				}
			}
		})
	}
}
