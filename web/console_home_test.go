package web_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"toolbelt/models"
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
	t.Parallel() // its own app and database
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
	// The refused call (bad arguments) is neither a failure nor in the
	// success rate: 4 of the 6 that ran succeeded.
	if got := p.TestID("stat-success-value").Text(); got != "66.7%" {
		t.Errorf("success rate %q, want 66.7%% (4 of the 6 that ran)", got)
	}
	if got := strings.Join(strings.Fields(p.TestID("stat-calls").Text()), " "); !strings.Contains(got, "4 succeeded · 2 failed · 1 refused") {
		t.Errorf("calls card %q", got)
	}
	hours := p.TestID("chart-hour")
	if hours.Length() != 24 || sumAttr(t, hours, "data-succeeded") != 4 || sumAttr(t, hours, "data-failed") != 2 || sumAttr(t, hours, "data-refused") != 1 {
		t.Errorf("chart: %d hours, %d succeeded, %d failed, %d refused", hours.Length(), sumAttr(t, hours, "data-succeeded"), sumAttr(t, hours, "data-failed"), sumAttr(t, hours, "data-refused"))
	}
	if p.Doc.Find(`svg.chart rect.bar.fail`).Length() != 1 || p.Doc.Find(`svg.chart rect.bar.refused`).Length() != 1 || p.Doc.Find(`svg.chart rect.bar`).Length() != 3 {
		t.Errorf("the chart draws %d bars", p.Doc.Find(`svg.chart rect.bar`).Length())
	}
	if p.Doc.Find("svg.chart title#chart-title").Length() != 1 || !strings.Contains(p.Doc.Find("svg.chart desc").Text(), "7 calls finished") {
		t.Errorf("chart description %q", p.Doc.Find("svg.chart desc").Text())
	}
	if !strings.Contains(p.TestID("chart-summary").Text(), "4 succeeded, 2 failed and 1 refused") {
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
	// For an admin the pending count links to the queue.
	want := "/admin/approvals"
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
	t.Parallel() // its own app and database
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
	if p.TestID("ranked-tool").Length() == 0 {
		t.Fatal("no shell tool ranked")
	}
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
		{"every field wrong", "q=&limit=x&category=nope", "error-query", "Describe the task"},
		{"every field wrong", "q=&limit=x&category=nope", "error-limit", "whole number"},
		{"every field wrong", "q=&limit=x&category=nope", "error-categories", "not a category"},
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

// keyWorks reports the status of GET /api/v1/me with key.
func keyWorks(t *testing.T, app *testApp, key string) int {
	t.Helper()
	app.keys["probe"] = key
	defer delete(app.keys, "probe")
	return app.do(t, "probe", "GET", "/api/v1/me", nil).Status
}

// Creating a principal shows its key once; the key works, can be joined
// by another and revoked; the last admin key is refused.
func TestConsoleAccessKeys(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	b := signedIn(t, app, "admin")

	p := b.get("/admin/access")
	if p.Status != 200 || p.TestID("principal-admin").Length() != 1 || p.TestID("principal-test-agent").Length() != 1 {
		t.Fatalf("access page: %d", p.Status)
	}

	// Invalid input: each error beside its field, nothing created.
	p = b.post("/admin/access/principals", url.Values{"name": {"bad name!"}, "role": {"boss"}})
	if p.Status != 422 || !strings.Contains(p.TestID("error-name").Text(), "ASCII letters") || !strings.Contains(p.TestID("error-role").Text(), "not a role") {
		t.Fatalf("invalid principal: %d name %q role %q", p.Status, p.TestID("error-name").Text(), p.TestID("error-role").Text())
	}
	if v, _ := p.Doc.Find("#acc-name").Attr("value"); v != "bad name!" {
		t.Errorf("the name typed is lost: %q", v)
	}

	// Created: the key is on this page only, with a warning.
	p = b.post("/admin/access/principals", url.Values{"name": {"ci-agent"}, "role": {"agent"}})
	key, _ := p.TestID("new-key").Attr("value")
	if p.Status != 201 || !strings.HasPrefix(key, "tb_") || !strings.Contains(p.TestID("key-warning").Text(), "only time") {
		t.Fatalf("create: %d key %q", p.Status, key)
	}
	if p.Header.Get("Cache-Control") != "no-store" {
		t.Error("the key page may be cached")
	}
	if got := keyWorks(t, app, key); got != 200 {
		t.Fatalf("the new key answers %d", got)
	}
	p = b.get("/admin/access")
	if strings.Contains(p.Doc.Text(), key) || p.Doc.Find(`[value="`+key+`"]`).Length() != 0 {
		t.Fatal("the access page shows the key again")
	}
	row := p.TestID("principal-ci-agent")
	if row.Find(`[data-testid="principal-role"]`).Text() != "agent" || row.Find(`[data-testid="key-`+key[:9]+`"]`).Length() != 1 {
		t.Fatalf("the new principal's row: %q", row.Text())
	}
	// The same name again is refused beside the field.
	if p = b.post("/admin/access/principals", url.Values{"name": {"ci-agent"}, "role": {"reviewer"}}); p.Status != 409 || !strings.Contains(p.TestID("error-name").Text(), "exists") {
		t.Fatalf("duplicate name: %d %q", p.Status, p.TestID("error-name").Text())
	}

	// Another key: shown once, both work.
	id := strings.TrimPrefix(b.get("/admin/access").TestID("row-ci-agent").AttrOr("id", ""), "principal-")
	p = b.post("/admin/access/principals/"+id+"/keys", url.Values{})
	second, _ := p.TestID("new-key").Attr("value")
	if p.Status != 201 || second == "" || second == key || keyWorks(t, app, second) != 200 || keyWorks(t, app, key) != 200 {
		t.Fatalf("issue key: %d %q", p.Status, second)
	}

	// Revoke the first: it stops working, the page says so.
	row = b.get("/admin/access").TestID("principal-ci-agent")
	keyID := row.Find(`[data-testid="key-`+key[:9]+`"]`).AttrOr("data-key-id", "")
	p = b.post("/admin/access/keys/"+keyID+"/revoke", url.Values{})
	if p.Status != 200 || !strings.Contains(p.TestID("notice").Text(), "revoked") {
		t.Fatalf("revoke: %d %q", p.Status, p.TestID("notice").Text())
	}
	if got := keyWorks(t, app, key); got != 401 {
		t.Errorf("a revoked key answers %d", got)
	}
	if state := p.TestID("principal-ci-agent").Find(`[data-testid="key-` + key[:9] + `"] [data-testid="key-state"]`).Text(); !strings.Contains(state, "revoked") {
		t.Errorf("key state %q", state)
	}

	// The last admin key: refused with the service's reason.
	adminKey := p.TestID("principal-admin").Find(`tr[data-key-id]`).AttrOr("data-key-id", "")
	p = b.post("/admin/access/keys/"+adminKey+"/revoke", url.Values{})
	if alert := strings.TrimSpace(p.TestID("alert").Text()); p.Status != 409 || !strings.HasPrefix(alert, "Not revoked: Key ") ||
		!strings.Contains(alert, "last active admin key") || strings.Contains(alert, "conflict") {
		t.Fatalf("last admin key: %d %q", p.Status, p.TestID("alert").Text())
	}
	if keyWorks(t, app, app.keys["admin"]) != 200 {
		t.Fatal("the admin key stopped working")
	}
	// A form without the CSRF token changes nothing.
	if p = b.post("/admin/access/principals", url.Values{"name": {"forged"}, "role": {"admin"}, "_csrf": {"x"}}); p.Status != 403 {
		t.Fatalf("forged form: %d", p.Status)
	}
}

// Grants are edited per agent, errors beside their field, and the agent's
// selection follows them.
func TestConsoleAccessGrants(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	b := signedIn(t, app, "admin")
	agent := strconv.Itoa(int(app.ids["agent"]))

	p := b.get("/admin/access")
	if p.TestID("principal-test-agent").Find(`[data-testid="grants-form"]`).Length() != 1 || p.TestID("principal-admin").Find(`[data-testid="grants-form"]`).Length() != 0 {
		t.Fatal("grants forms: agents only")
	}

	p = b.post("/admin/access/principals/"+agent+"/grants", url.Values{"category": {"filesystem", "nope"}, "tools": {"web_search, Bad-Name"}})
	form := p.TestID("principal-test-agent")
	if p.Status != 422 || !strings.Contains(form.Find(`[data-testid="error-tools"]`).Text(), "Bad-Name") ||
		!strings.Contains(form.Find(`[data-testid="error-categories"]`).Text(), "nope") {
		t.Fatalf("invalid grants: %d %q", p.Status, form.Find(".field-error").Text())
	}
	// A safe tool comes back ticked, any other name as typed.
	if v, _ := form.Find(`[data-testid="grant-tools"]`).Attr("value"); v != "Bad-Name" || form.Find(`[data-testid="grant-tool-web_search"][checked]`).Length() != 1 {
		t.Errorf("the tools typed are lost: %q", v)
	}
	if got := app.do(t, "admin", "GET", "/api/v1/principals/"+agent+"/grants", nil).JSON(t); len(got["categories"].([]any)) != 0 {
		t.Fatalf("invalid grants were stored: %v", got)
	}
	// Tools granted by name must exist and be safe, as through the API:
	// each problem is beside the field, and nothing is stored.
	p = b.post("/admin/access/principals/"+agent+"/grants", url.Values{"category": {"filesystem"}, "tools": {"web_search no_such_tool file_write"}})
	errTools := p.TestID("principal-test-agent").Find(`[data-testid="error-tools"]`).Text()
	if p.Status != 422 || !strings.Contains(errTools, `"no_such_tool" is not a registered tool`) || !strings.Contains(errTools, `"file_write" is moderate`) || strings.Contains(errTools, "web_search") {
		t.Fatalf("grants of a missing and a moderate tool: %d %q", p.Status, errTools)
	}
	if got := app.do(t, "admin", "GET", "/api/v1/principals/"+agent+"/grants", nil).JSON(t); len(got["categories"].([]any)) != 0 || len(got["tools"].([]any)) != 0 {
		t.Fatalf("invalid grants were stored: %v", got)
	}
	// Grants apply to agents only: the service's reason is shown.
	if p = b.post("/admin/access/principals/1/grants", url.Values{"category": {"shell"}}); p.Status != 422 || !strings.Contains(p.TestID("alert").Text(), "grants apply to agents") {
		t.Fatalf("grants of an admin: %d %q", p.Status, p.TestID("alert").Text())
	}

	// A safe tool ticked in the list is granted as one typed.
	if p.TestID("principal-test-agent").Find(`[data-testid="grant-tool-shell_exec"]`).Length() != 0 {
		t.Error("a dangerous tool is offered as a single tool")
	}
	p = b.post("/admin/access/principals/"+agent+"/grants", url.Values{"category": {"filesystem"}, "tool": {"web_search"}})
	if p.Status != 200 || !strings.Contains(p.TestID("notice").Text(), "Grants saved: 1 category, 1 tool") {
		t.Fatalf("save grants: %d %q", p.Status, p.TestID("notice").Text())
	}
	form = p.TestID("principal-test-agent")
	if form.Find(`[data-testid="grant-filesystem"][checked]`).Length() != 1 || form.Find(`[data-testid="grant-shell"][checked]`).Length() != 0 ||
		form.Find(`[data-testid="grant-tool-web_search"][checked]`).Length() != 1 || form.Find(`[data-testid="grant-tools"]`).AttrOr("value", "") != "" {
		t.Fatal("the saved grants are not shown")
	}

	// The agent's selection, through the API and the playground, keeps to them.
	res := app.do(t, "agent", "POST", "/api/v1/tools/select", map[string]any{"query": "run a shell command or read a file", "limit": 20}).JSON(t)
	for _, tool := range res["tools"].([]any) {
		m := tool.(map[string]any)
		if m["category"] != "filesystem" && m["name"] != "web_search" {
			t.Errorf("the agent is offered %v (%v)", m["name"], m["category"])
		}
	}
	ap := signedIn(t, app, "agent").get("/admin/playground?q=run+a+shell+command+or+read+a+file&limit=20")
	if ap.Status != 200 || ap.TestID("ranked-tool").Length() == 0 {
		t.Fatalf("agent playground: %d", ap.Status)
	}
	ap.TestID("ranked-tool").Each(func(_ int, s *goquery.Selection) {
		if name := s.AttrOr("data-name", ""); !strings.HasPrefix(name, "file_") && name != "web_search" {
			t.Errorf("the agent's playground offers %s", name)
		}
	})
}

// Each role sees the navigation entries it may open, and only admins open
// the access page.
func TestConsoleHomeRoles(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	for _, tc := range []struct {
		role       string
		wantNav    []string
		notNav     []string
		accessCode int
	}{
		{"admin", []string{"Dashboard", "Playground", "Access"}, nil, 200},
		{"reviewer", []string{"Dashboard", "Playground"}, []string{"Access"}, 403},
		{"agent", []string{"Dashboard", "Playground"}, []string{"Access"}, 403},
	} {
		t.Run(tc.role, func(t *testing.T) {
			b := signedIn(t, app, tc.role)
			p := b.get("/admin")
			for _, n := range tc.wantNav {
				if p.TestID("nav-"+n).Length() != 1 {
					t.Errorf("no %s in the navigation", n)
				}
			}
			for _, n := range tc.notNav {
				if p.TestID("nav-"+n).Length() != 0 {
					t.Errorf("%s is in the navigation", n)
				}
			}
			// Every entry shown opens.
			p.TestID("nav").Find("a").Each(func(_ int, a *goquery.Selection) {
				if got := b.get(a.AttrOr("href", "")).Status; got != 200 {
					t.Errorf("%s answers %d", a.AttrOr("href", ""), got)
				}
			})
			p = b.get("/admin/access")
			if p.Status != tc.accessCode {
				t.Fatalf("/admin/access: %d, want %d", p.Status, tc.accessCode)
			}
			if tc.accessCode == 403 {
				if p.TestID("error-page").AttrOr("data-status", "") != "403" || p.TestID("principal-admin").Length() != 0 {
					t.Error("not a 403 page")
				}
				p = b.post("/admin/access/principals", url.Values{"name": {"sneaky"}, "role": {"admin"}})
				if p.Status != 403 {
					t.Errorf("POST as %s: %d", tc.role, p.Status)
				}
			}
		})
	}
}

// The dashboard counts approvals waiting and flags a tool whose failure
// rate rose in the last hour, with its numbers.
func TestConsoleDashboardApprovalsAndRising(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	dangerousWrite(t, app)
	r := app.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "overwrite_note", "arguments": map[string]any{"path": "n.txt", "content": "x"}})
	if r.Status != 202 {
		t.Fatalf("dangerous call: %d %s", r.Status, r.Body)
	}
	// History as recorded: web_search fine for hours, failing in the last one.
	now := time.Now().UTC()
	var calls []*models.Call
	for i := range 20 {
		calls = append(calls, &models.Call{ID: fmt.Sprintf("old%02d", i), Tool: "web_search", Status: "succeeded", TotalMs: 40,
			CreatedAt: now.Add(-2*time.Hour - time.Duration(i)*time.Minute)})
	}
	for i := range 6 {
		calls = append(calls, &models.Call{ID: fmt.Sprintf("new%02d", i), Tool: "web_search", Status: "failed", ErrorCode: "UPSTREAM_ERROR",
			TotalMs: 900, CreatedAt: now.Add(-time.Duration(i+1) * time.Minute)})
	}
	if err := app.store.SaveCalls(context.Background(), calls); err != nil {
		t.Fatal(err)
	}

	p := signedIn(t, app, "reviewer").get("/admin")
	if got := p.TestID("stat-approvals-value").Text(); got != "1" {
		t.Errorf("pending approvals %q, want 1", got)
	}
	if got := strings.Join(strings.Fields(p.TestID("stat-calls").Text()), " "); !strings.Contains(got, "1 open") {
		t.Errorf("calls card %q", got)
	}
	rising := strings.Join(strings.Fields(p.TestID("rising-web_search").Text()), " ")
	if !strings.Contains(rising, "100.0% failed in the last hour (6 of 6)") || !strings.Contains(rising, "0.0% before (0 of 20)") {
		t.Errorf("rising %q", rising)
	}
	if p.TestID("rising-overwrite_note").Length() != 0 {
		t.Error("a waiting call is flagged as failing")
	}
}

// TestConsoleDashboardWaitingCalls: a tool whose calls all wait for
// approval has no success rate yet (it showed 0.0%), and the waiting calls
// are open, not failed.
func TestConsoleDashboardWaitingCalls(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	for range 2 {
		if code, res := app.call(t, "admin", map[string]any{"tool": "shell_exec", "arguments": map[string]any{"command": "ls"}}); code != 202 {
			t.Fatalf("shell call: %d %v", code, res)
		}
	}
	p := signedIn(t, app, "admin").get("/admin")
	if got := strings.TrimSpace(p.TestID("top-shell_exec").Find(`[data-testid="top-success"]`).Text()); got != "–" {
		t.Errorf("success of a tool whose calls all wait: %q", got)
	}
	if p.TestID("stat-open").Text() != "2 open" || p.TestID("stat-failed").Text() != "0 failed" || p.TestID("stat-success-value").Text() != "–" {
		t.Errorf("calls card %q, success %q", p.TestID("stat-calls").Text(), p.TestID("stat-success-value").Text())
	}
}

// TestConsoleDashboardNavigates: a new admin is told what to do first; the
// window is 1 h, 24 h or 7 d; each count, hour bar and tool opens the
// history filtered to it, and what the history lists is what was counted.
func TestConsoleDashboardNavigates(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	b := signedIn(t, app, "admin")
	p := b.get("/admin")
	if p.TestID("dash-empty").Find(`a[href="/admin/tools/new"]`).Length() != 1 || p.TestID("dash-empty").Find(`a[href="/admin/access"]`).Length() != 1 {
		t.Errorf("empty state %q", p.TestID("dash-empty").Text())
	}
	app.call(t, "admin", map[string]any{"tool": "file_write", "session_id": "nav", "arguments": map[string]any{"path": "a.txt", "content": "x"}})
	app.call(t, "admin", map[string]any{"tool": "file_read", "session_id": "nav", "arguments": map[string]any{"path": "missing.txt"}})
	app.call(t, "admin", map[string]any{"tool": "file_read", "arguments": map[string]any{}})

	p = b.get("/admin")
	if p.TestID("dash-empty").Length() != 0 || p.TestID("range-24h").AttrOr("aria-current", "") != "page" || p.TestID("dash-live").AttrOr("hx-trigger", "") != "every 30s" {
		t.Errorf("dashboard with calls: empty state %d, range %q", p.TestID("dash-empty").Length(), p.TestID("range-24h").AttrOr("aria-current", ""))
	}
	rows := func(href string) []string {
		var ids []string
		b.get(href).TestID("call-row").Each(func(_ int, r *goquery.Selection) { ids = append(ids, r.AttrOr("data-call-id", "")) })
		return ids
	}
	for _, tc := range []struct {
		testid string
		want   int
	}{{"stat-calls-value", 3}, {"stat-succeeded", 1}, {"stat-failed", 1}, {"stat-refused", 1}} {
		href := p.TestID(tc.testid).AttrOr("href", "")
		if got := rows(href); !strings.HasPrefix(href, "/admin/calls?") || len(got) != tc.want {
			t.Errorf("%s links to %q listing %d calls, want %d", tc.testid, href, len(got), tc.want)
		}
	}
	if got := rows(p.TestID("top-file_read").Find(`[data-testid="top-calls"]`).AttrOr("href", "")); len(got) != 2 {
		t.Errorf("file_read's count lists %d calls, want 2", len(got))
	}
	busy := 0
	p.TestID("chart-hour").Each(func(_ int, h *goquery.Selection) {
		if h.AttrOr("data-succeeded", "0") != "0" {
			busy++
			if got := rows(h.AttrOr("href", "")); len(got) != 3 {
				t.Errorf("the hour bar lists %d calls, want 3", len(got))
			}
		}
	})
	if busy != 1 {
		t.Errorf("%d hours with calls, want 1", busy)
	}

	for _, tc := range []struct {
		rng, label string
		hours      int
	}{{"1h", "Last hour", 1}, {"7d", "Last 7 days", 168}} {
		p = b.get("/admin?range=" + tc.rng)
		if p.Status != 200 || p.TestID("chart-hour").Length() != tc.hours || !strings.Contains(p.TestID("dash-live").Find("h2").Text(), tc.label) || p.TestID("stat-calls-value").Text() != "3" {
			t.Errorf("range %s: %d, %d hours, %q", tc.rng, p.Status, p.TestID("chart-hour").Length(), p.TestID("dash-live").Find("h2").Text())
		}
	}
	if p = b.get("/admin?range=1y"); p.Status != 400 || !strings.Contains(p.Doc.Find("main").Text(), "use one of 1h, 24h, 7d") {
		t.Errorf("an unknown range: %d %q", p.Status, strings.TrimSpace(p.Doc.Find("main").Text()))
	}
}

// TestConsolePlaygroundFormatAndFeedback: the playground renders the
// selection in the chosen LLM format, and "Fits the task" teaches the
// ranking: the query becomes one the tool was learned from.
func TestConsolePlaygroundFormatAndFeedback(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	b := signedIn(t, app, "admin")
	p := b.get("/admin/playground?q=" + url.QueryEscape("list the files in my project folder") + "&format=anthropic")
	row := p.TestID("ranked").Find(`tr[data-name="file_list"]`)
	if p.Status != 200 || p.TestID("playground-format").Find("option[selected]").AttrOr("value", "") != "anthropic" ||
		!strings.Contains(row.Find(`[data-testid="ranked-rendering"]`).Text(), `"input_schema"`) {
		t.Fatalf("anthropic rendering: %d %q", p.Status, row.Find(`[data-testid="ranked-rendering"]`).Text())
	}
	form := row.Find(`[data-testid="feedback-file_list"]`)
	id := form.Find(`input[name="selection_id"]`).AttrOr("value", "")
	p = b.post("/admin/playground/feedback", url.Values{"selection_id": {id}, "tool": {"file_list"}})
	if p.Status != 200 || !strings.Contains(p.TestID("notice").Text(), "tasks like this one now find file_list") {
		t.Fatalf("feedback: %d %q", p.Status, p.TestID("notice").Text())
	}
	found := false
	for _, q := range app.do(t, "admin", "GET", "/api/v1/tools/file_list/queries", nil).JSON(t)["queries"].([]any) {
		if q.(map[string]any)["query"] == "list the files in my project folder" {
			found = true
		}
	}
	if !found {
		t.Error("the feedback taught nothing: the query is not among file_list's learned queries")
	}
	if p = b.post("/admin/playground/feedback", url.Values{"selection_id": {"nope"}, "tool": {"file_list"}}); p.Status != 404 {
		t.Errorf("feedback on a selection that does not exist: %d", p.Status)
	}
	if p = b.get("/admin/playground?q=x&format=yaml"); p.Status == 200 {
		t.Errorf("an unknown format: %d", p.Status)
	}
}

// TestConsoleAccessSearch: with many principals the access page lists a
// row each, closed; a search by name or role narrows it (the one match
// opened to its keys and grants), open= opens one row, and a role that is
// none is 400.
func TestConsoleAccessSearch(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	for i := range 20 {
		if r := app.do(t, "admin", "POST", "/api/v1/principals", map[string]any{"name": fmt.Sprintf("bot-%02d", i), "role": "agent"}); r.Status != 201 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
	}
	b := signedIn(t, app, "admin")
	p := b.get("/admin/access")
	rows := p.Doc.Find("details.acc-row")
	if rows.Length() != 23 || p.Doc.Find("details.acc-row[open]").Length() != 0 || !strings.Contains(p.TestID("principal-count").Text(), "23 principals") {
		t.Fatalf("the list: %d rows, %d open, %q", rows.Length(), p.Doc.Find("details.acc-row[open]").Length(), p.TestID("principal-count").Text())
	}
	p = b.get("/admin/access?q=BOT-07")
	if open := p.Doc.Find("details.acc-row[open]"); p.Doc.Find("details.acc-row").Length() != 1 || open.AttrOr("data-testid", "") != "row-bot-07" ||
		open.Find(`[data-testid="keys"]`).Length() != 1 || !strings.Contains(p.TestID("principal-count").Text(), "1 of 23") {
		t.Errorf("a search by name: %q", p.TestID("principal-count").Text())
	}
	p = b.get("/admin/access?role=reviewer")
	if got := p.Doc.Find("details.acc-row").Map(func(_ int, s *goquery.Selection) string { return s.AttrOr("data-testid", "") }); !slices.Equal(got, []string{"row-test-reviewer"}) {
		t.Errorf("reviewers: %v", got)
	}
	id := strings.TrimPrefix(b.get("/admin/access").TestID("row-bot-11").AttrOr("id", ""), "principal-")
	p = b.get("/admin/access?open=" + id)
	if open := p.Doc.Find("details.acc-row[open]"); open.Length() != 1 || open.AttrOr("data-testid", "") != "row-bot-11" {
		t.Errorf("open=%s opens %d rows", id, open.Length())
	}
	for _, bad := range []string{"?role=root", "?open=x", "?sort=name"} {
		if p := b.get("/admin/access" + bad); p.Status != 400 {
			t.Errorf("%s: %d", bad, p.Status)
		}
	}
}
