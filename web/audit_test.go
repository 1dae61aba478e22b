package web_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"toolbelt/models"
)

// auditSince returns the entries newer than id, oldest first, read through
// the API as the admin.
func auditSince(t *testing.T, app *testApp, id float64) []map[string]any {
	t.Helper()
	r := app.do(t, "admin", "GET", "/api/v1/audit?limit=500", nil)
	if r.Status != 200 {
		t.Fatalf("audit: %d %s", r.Status, r.Body)
	}
	var out []map[string]any
	for _, e := range r.JSON(t)["entries"].([]any) {
		if m := e.(map[string]any); m["id"].(float64) > id {
			out = append([]map[string]any{m}, out...)
		}
	}
	return out
}

// lastAuditID is the newest entry's id (0 when there is none).
func lastAuditID(t *testing.T, app *testApp) float64 {
	t.Helper()
	es := app.do(t, "admin", "GET", "/api/v1/audit?limit=1", nil).JSON(t)["entries"].([]any)
	if len(es) == 0 {
		return 0
	}
	return es[0].(map[string]any)["id"].(float64)
}

// TestAuditOneEntryPerAction makes each audited change through the real
// router, as the admin (or the reviewer, for decisions), and checks it
// wrote exactly one entry naming the actor, its key (never the secret),
// the client's address and the target; each refused or failed variant
// writes none.
func TestAuditOneEntryPerAction(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	dangerousWrite(t, app)
	_, approved := dangerousCall(t, app, "agent", "to approve")
	_, denied := dangerousCall(t, app, "agent", "to deny")
	reviewerKey := 0.0
	for _, p := range app.do(t, "admin", "GET", "/api/v1/principals", nil).JSON(t)["principals"].([]any) {
		if p := p.(map[string]any); p["name"] == "test-reviewer" {
			reviewerKey = p["keys"].([]any)[0].(map[string]any)["id"].(float64)
		}
	}
	future := time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)
	var botKey string // the id of the bot's second key, once issued
	steps := []struct {
		name   string
		role   string
		method string
		path   func() string
		body   any
		status int
		action string // "" : no entry
		target string // "" : any
		detail string // a part of the detail
	}{
		{"register", "admin", "POST", fixed("/api/v1/tools"), toolDef("word_count"), 201, "tool.register", "tool:word_count", "version 1.0.0"},
		{"register a taken name", "admin", "POST", fixed("/api/v1/tools"), toolDef("word_count"), 409, "", "", ""},
		{"register invalid", "admin", "POST", fixed("/api/v1/tools"), map[string]any{"name": "Bad Name"}, 422, "", "", ""},
		{"publish", "admin", "PUT", fixed("/api/v1/tools/word_count"), toolDef("word_count", func(m map[string]any) { m["version"] = "1.1.0" }), 200, "tool.publish", "tool:word_count", "version 1.1.0"},
		{"publish an older version", "admin", "PUT", fixed("/api/v1/tools/word_count"), toolDef("word_count", func(m map[string]any) { m["version"] = "1.0.5" }), 422, "", "", ""},
		{"roll back", "admin", "POST", fixed("/api/v1/tools/word_count/rollback"), map[string]any{"version": "1.0.0"}, 200, "tool.rollback", "tool:word_count", "1.0.0"},
		{"roll back to no version", "admin", "POST", fixed("/api/v1/tools/word_count/rollback"), map[string]any{"version": "9.9.9"}, 404, "", "", ""},
		{"retire", "admin", "DELETE", fixed("/api/v1/tools/word_count"), nil, 204, "tool.retire", "tool:word_count", ""},
		{"retire an unknown tool", "admin", "DELETE", fixed("/api/v1/tools/no_such_tool"), nil, 404, "", "", ""},
		{"create a principal", "admin", "POST", fixed("/api/v1/principals"), map[string]any{"name": "bot", "role": "agent", "key_label": "first"}, 201, "principal.create", "principal:4", "first"},
		{"create a taken name", "admin", "POST", fixed("/api/v1/principals"), map[string]any{"name": "bot", "role": "agent"}, 409, "", "", ""},
		{"issue a key", "admin", "POST", fixed("/api/v1/principals/4/keys"), map[string]any{"label": "ci deploy", "expires_at": future}, 201, "key.issue", "", "ci deploy"},
		{"issue an expired key", "admin", "POST", fixed("/api/v1/principals/4/keys"), map[string]any{"expires_at": "2020-01-01T00:00:00Z"}, 422, "", "", ""},
		{"issue a key to nobody", "admin", "POST", fixed("/api/v1/principals/99/keys"), nil, 404, "", "", ""},
		{"set grants", "admin", "PUT", fixed("/api/v1/principals/4/grants"), map[string]any{"categories": []string{"filesystem"}, "tools": []string{}}, 200, "grants.set", "principal:4", "filesystem"},
		{"set invalid grants", "admin", "PUT", fixed("/api/v1/principals/4/grants"), map[string]any{"categories": []string{"nope"}}, 422, "", "", ""},
		{"revoke a key", "admin", "DELETE", func() string { return "/api/v1/keys/" + botKey }, nil, 204, "key.revoke", "", "ci deploy"},
		{"revoke the last admin key", "admin", "DELETE", fixed("/api/v1/keys/1"), nil, 409, "", "", ""},
		{"disable", "admin", "POST", fixed("/api/v1/principals/4/disable"), nil, 200, "principal.disable", "principal:4", "bot"},
		{"disable yourself", "admin", "POST", fixed("/api/v1/principals/1/disable"), nil, 403, "", "", ""},
		{"enable", "admin", "POST", fixed("/api/v1/principals/4/enable"), nil, 200, "principal.enable", "principal:4", "bot"},
		{"delete", "admin", "DELETE", fixed("/api/v1/principals/4"), nil, 204, "principal.delete", "principal:4", "bot"},
		{"delete yourself", "admin", "DELETE", fixed("/api/v1/principals/1"), nil, 403, "", "", ""},
		{"delete nobody", "admin", "DELETE", fixed("/api/v1/principals/4"), nil, 404, "", "", ""},
		{"approve", "reviewer", "POST", fixed("/api/v1/approvals/" + approved + "/approve"), map[string]any{"reason": "looks fine"}, 200, "approval.approve", "approval:" + approved, "looks fine"},
		{"approve again", "reviewer", "POST", fixed("/api/v1/approvals/" + approved + "/approve"), map[string]any{}, 409, "", "", ""},
		{"deny", "reviewer", "POST", fixed("/api/v1/approvals/" + denied + "/deny"), map[string]any{"reason": "not today"}, 200, "approval.deny", "approval:" + denied, "not today"},
		{"deny without a reason", "admin", "POST", fixed("/api/v1/approvals/" + denied + "/deny"), map[string]any{}, 422, "", "", ""},
	}
	for _, st := range steps {
		last := lastAuditID(t, app)
		r := app.do(t, st.role, st.method, st.path(), st.body)
		if r.Status != st.status {
			t.Fatalf("%s: status %d, want %d: %s", st.name, r.Status, st.status, r.Body)
		}
		if st.name == "issue a key" {
			botKey = itoa(r.JSON(t)["id"])
			st.target = "key:" + botKey
		}
		if st.name == "revoke a key" {
			st.target = "key:" + botKey
		}
		got := auditSince(t, app, last)
		if st.action == "" {
			if len(got) != 0 {
				t.Errorf("%s (refused) wrote %d entries: %v", st.name, len(got), got)
			}
			continue
		}
		if len(got) != 1 {
			t.Fatalf("%s wrote %d entries, want 1: %v", st.name, len(got), got)
		}
		e := got[0]
		actor, keyID := "admin", 1.0
		if st.role == "reviewer" {
			actor, keyID = "test-reviewer", reviewerKey
		}
		if e["action"] != st.action || (st.target != "" && e["target"] != st.target) || !strings.Contains(fmt.Sprint(e["detail"]), st.detail) ||
			e["actor"] != actor || e["actor_role"] != st.role || e["via"] != "api" || e["client_ip"] != "192.0.2.1" || e["key_id"] != keyID ||
			!strings.HasPrefix(fmt.Sprint(e["key_label"]), "tb_") || e["request_id"] == nil {
			t.Errorf("%s: entry %v, want %s on %s by %s with key %v", st.name, e, st.action, st.target, actor, keyID)
		}
	}
	// Nothing in the log reveals a key.
	all := app.do(t, "admin", "GET", "/api/v1/audit?format=ndjson", nil).Body
	for role, key := range app.keys {
		if key != "" && bytes.Contains(all, []byte(key)) {
			t.Errorf("the audit log holds the key of %s", role)
		}
	}
}

func fixed(path string) func() string { return func() string { return path } }

// TestAuditAPIFilters: only admins read the log; filters select what they
// say and pages go newest first by cursor; anything that cannot be a
// filter (quotes, wildcards, very long values, unknown actions, bad times
// or cursors) is a 400 that quotes it shortened; the export streams every
// entry, as NDJSON or CSV, with cells a spreadsheet would run defused.
func TestAuditAPIFilters(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	for _, role := range []string{"agent", "reviewer"} {
		if r := app.do(t, role, "GET", "/api/v1/audit", nil); r.Status != 403 {
			t.Errorf("%s reads the audit log: %d", role, r.Status)
		}
		b := signedIn(t, app, role)
		if p := b.get("/admin/audit"); p.Status != 403 || p.TestID("error-page").Length() != 1 {
			t.Errorf("%s opens the audit page: %d", role, p.Status)
		}
		if p := b.get("/admin/audit/export"); p.Status != 403 {
			t.Errorf("%s exports the audit log: %d", role, p.Status)
		}
	}
	// The first start recorded the built-in tools and the fixture's two
	// principals, as the server's own changes.
	fixture := int(lastAuditID(t, app))
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var rows []models.AuditEntry
	for i := range 1203 {
		actor, action := "alice", models.AuditKeyIssue
		if i%3 == 0 {
			actor, action = "bob", models.AuditToolRetire
		}
		rows = append(rows, models.AuditEntry{At: base.Add(time.Duration(i) * time.Minute), Actor: actor, Via: "api",
			Action: action, Target: fmt.Sprintf("key:%d", i%10), Detail: "=HYPERLINK(\"http://x\")"})
	}
	if err := app.store.DB().CreateInBatches(rows, 200).Error; err != nil {
		t.Fatal(err)
	}
	total := 1203 + fixture
	long := strings.Repeat("a", 5000)
	for _, q := range []string{
		"action=drop+table", "action=" + url.QueryEscape("key.issue' OR '1'='1"), "actor=" + url.QueryEscape("x' OR 1=1--"),
		"actor=" + long, "target=" + long, "target=" + url.QueryEscape("tool:a b"),
		"target=" + url.QueryEscape("tool:\x00"), "since=yesterday", "until=2026-13-01", "since=2026-11-02&until=2026-11-01",
		"cursor=abc", "cursor=-1", "limit=0", "limit=501", "limit=x", "format=xml", "sort=id", "actor=" + url.QueryEscape("<script>"),
	} {
		r := app.do(t, "admin", "GET", "/api/v1/audit?"+q, nil)
		if r.Status != 400 {
			t.Errorf("%.60s: status %d, want 400: %.200s", q, r.Status, r.Body)
			continue
		}
		e := r.JSON(t)["error"].(map[string]any)
		if e["code"] != "INVALID_REQUEST" || len(fmt.Sprint(e["message"])) > 400 {
			t.Errorf("%.60s: %v", q, e)
		}
	}
	for _, tc := range []struct {
		q    string
		want int
	}{
		{"", total},
		{"actor=bob", 401},
		{"action=key.issue", 802},
		{"target=key:3", 120},
		{"since=2026-11-01T20:00:00Z", 3 + fixture},
		{"target=" + url.QueryEscape("key:%"), 0}, // a value, not a pattern
		{"until=2026-11-01T00:10:00Z", 10},
		{"actor=bob&since=2026-11-01T00:00&until=2026-11-01T00:09", 3},
		{"actor=system", fixture - 2}, // less the agent's and the reviewer's sign-ins above
	} {
		seen, pages := map[float64]bool{}, 0
		cursor, prev := "", 1e18
		for {
			r := app.do(t, "admin", "GET", "/api/v1/audit?limit=500&"+tc.q+cursor, nil)
			if r.Status != 200 {
				t.Fatalf("%s: %d %s", tc.q, r.Status, r.Body)
			}
			page := r.JSON(t)
			for _, e := range page["entries"].([]any) {
				id := e.(map[string]any)["id"].(float64)
				if seen[id] || id >= prev {
					t.Fatalf("%s: entry %v repeated or out of order", tc.q, id)
				}
				seen[id], prev = true, id
			}
			pages++
			next, _ := page["next_cursor"].(string)
			if next == "" {
				break
			}
			cursor = "&cursor=" + next
		}
		if len(seen) != tc.want {
			t.Errorf("%s: %d entries in %d pages, want %d", tc.q, len(seen), pages, tc.want)
		}
	}

	// Ordered by actor, pages of 100 follow by cursor: bob's 401 entries
	// (Z to A: after the others), each actor's newest first; the CSV
	// export takes the same order.
	var actors []string
	var bobIDs []float64
	for cursor := ""; ; {
		r := app.do(t, "admin", "GET", "/api/v1/audit?sort=-actor&limit=100"+cursor, nil)
		if r.Status != 200 {
			t.Fatalf("sort=-actor: %d %s", r.Status, r.Body)
		}
		page := r.JSON(t)
		for _, e := range page["entries"].([]any) {
			m := e.(map[string]any)
			actors = append(actors, m["actor"].(string))
			if m["actor"] == "bob" {
				bobIDs = append(bobIDs, m["id"].(float64))
			}
		}
		next, _ := page["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = "&cursor=" + next
	}
	if len(actors) != total || !slices.IsSortedFunc(actors, func(a, b string) int { return strings.Compare(b, a) }) ||
		len(bobIDs) != 401 || !slices.IsSortedFunc(bobIDs, func(a, b float64) int { return cmp.Compare(b, a) }) {
		t.Errorf("sort=-actor: %d entries, %d of bob's, first actors %v", len(actors), len(bobIDs), actors[:min(len(actors), 3)])
	}
	r := app.do(t, "admin", "GET", "/api/v1/audit?format=csv&sort=actor&action=tool.retire", nil)
	if recs, err := csv.NewReader(bytes.NewReader(r.Body)).ReadAll(); err != nil || len(recs) != 402 || recs[1][2] != "bob" {
		t.Errorf("csv export by actor: %d records %v", len(recs), err)
	}

	r = app.do(t, "admin", "GET", "/api/v1/audit?format=ndjson", nil)
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("ndjson: %d %v", r.Status, r.Header)
	}
	if n := bytes.Count(r.Body, []byte("\n")); n != total {
		t.Errorf("ndjson export: %d lines, want %d", n, total)
	}
	r = app.do(t, "admin", "GET", "/api/v1/audit?format=csv&actor=bob", nil)
	recs, err := csv.NewReader(bytes.NewReader(r.Body)).ReadAll()
	if err != nil || r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("csv: %d %v %v", r.Status, r.Header, err)
	}
	if len(recs) != 401+1 || recs[0][0] != "id" || recs[1][2] != "bob" || !strings.HasPrefix(recs[1][11], "'=") {
		t.Errorf("csv export: %d records, first %v", len(recs), recs[:2])
	}
	// The console's export, for a signed-in admin, is the same stream.
	b := signedIn(t, app, "admin")
	resp, err := b.http.Get(b.srv.URL + "/admin/audit/export?action=tool.retire")
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		lines++
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || lines != 401+1 {
		t.Errorf("console export: %d, %d lines", resp.StatusCode, lines)
	}
}

// TestConsoleAudit: the console's changes are recorded as the console's,
// with the key the session signed in with; the audit page lists them
// newest first, filters them, pages them, says when nothing matches, and
// answers a filter that cannot be one with 400 and the reason.
func TestConsoleAudit(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	b := signedIn(t, app, "admin")
	if p := b.get("/admin/audit?action=key.revoke"); p.Status != 200 || !strings.Contains(p.TestID("audit-empty").Text(), "No entry matches") {
		t.Fatalf("empty filter: %d %q", p.Status, p.TestID("audit-empty").Text())
	}
	bot := app.do(t, "admin", "POST", "/api/v1/principals", map[string]any{"name": "bot", "role": "agent"}).JSON(t)
	b.get("/admin/access")
	if p := b.post("/admin/access/keys/"+itoa(bot["key_id"])+"/revoke", url.Values{}); p.Status != 200 {
		t.Fatalf("revoke: %d", p.Status)
	}
	p := b.get("/admin/audit?actor=admin")
	rows := p.TestID("audit-row")
	if p.Status != 200 || rows.Length() != 3 { // the sign-in, bot, then its key revoked
		t.Fatalf("audit page: %d, %d rows", p.Status, rows.Length())
	}
	first := rows.First()
	if got := first.Find(`[data-testid="audit-action"]`).Text(); got != "key.revoke" {
		t.Errorf("newest row is %q", got)
	}
	from := first.Find(`[data-testid="audit-from"]`).Text()
	if !strings.Contains(from, "console") || !strings.Contains(from, "127.0.0.1") || !strings.Contains(from, "(1)") {
		t.Errorf("from %q: want the console, the address and key 1", from)
	}
	if got := rows.Eq(1).Find(`[data-testid="audit-from"]`).Text(); !strings.Contains(got, "api") || !strings.Contains(got, "192.0.2.1") {
		t.Errorf("the API's row from %q", got)
	}
	if got := rows.Eq(2).Find(`[data-testid="audit-action"]`).Text(); got != models.AuditSignIn {
		t.Errorf("the oldest row is %q, want the admin's sign-in", got)
	}
	// The target is named and linked: the principal bot, its calls.
	if p := b.get("/admin/audit?actor=admin&action=principal.create"); p.TestID("audit-row").Length() != 1 ||
		strings.TrimSpace(p.TestID("audit-target").Text()) != "principal bot" ||
		p.TestID("audit-target").Find("a").AttrOr("href", "") != "/admin/calls?principal=4" || p.TestID("audit-target").Find("a").AttrOr("title", "") != "principal:4" {
		t.Errorf("filtered: %d rows, target %q", p.TestID("audit-row").Length(), p.TestID("audit-target").Text())
	}
	p = b.get("/admin/audit?target=" + url.QueryEscape("x' OR 1=1"))
	if p.Status != 400 || !strings.Contains(p.TestID("audit-error").Text(), "target") || p.TestID("audit-row").Length() != 0 {
		t.Errorf("hostile filter: %d %q", p.Status, p.TestID("audit-error").Text())
	}
	// Pages of 50, by cursor.
	ctx := context.Background()
	for i := range 60 {
		if err := app.store.Audited(ctx, models.AuditToolRetire, func(*models.Store) (string, string, error) { return fmt.Sprintf("tool:t%d", i), "", nil }); err != nil {
			t.Fatal(err)
		}
	}
	p = b.get("/admin/audit?action=tool.retire")
	older, _ := p.TestID("audit-older").Attr("href")
	if p.TestID("audit-row").Length() != 50 || older == "" {
		t.Fatalf("first page: %d rows, older %q", p.TestID("audit-row").Length(), older)
	}
	p = b.get(older)
	if p.TestID("audit-row").Length() != 10 || p.TestID("audit-older").Length() != 0 || p.TestID("audit-newest").Length() != 1 {
		t.Errorf("second page: %d rows", p.TestID("audit-row").Length())
	}
	// Ordered by a column: the header says so and links the reverse, the
	// pages follow in that order, the filter form keeps it.
	p = b.get("/admin/audit?action=tool.retire")
	if href := p.TestID("sort-target").AttrOr("href", ""); href != "/admin/audit?action=tool.retire&sort=target" {
		t.Errorf("the target header links %q", href)
	}
	p = b.get("/admin/audit?action=tool.retire&sort=target")
	var targets []string
	for {
		p.TestID("audit-target").Each(func(_ int, s *goquery.Selection) {
			targets = append(targets, s.Find("[title]").AttrOr("title", s.Text()))
		})
		next := p.TestID("audit-older").AttrOr("href", "")
		if next == "" {
			break
		}
		if !strings.Contains(next, "sort=target") || strings.TrimSpace(p.TestID("audit-older").Text()) != "Next page" {
			t.Fatalf("the next page %q (%q) drops the order", next, p.TestID("audit-older").Text())
		}
		p = b.get(next)
	}
	if len(targets) != 60 || !slices.IsSorted(targets) || targets[0] != "tool:t0" || targets[1] != "tool:t1" || targets[2] != "tool:t10" {
		t.Errorf("%d targets by target: %v", len(targets), targets[:min(len(targets), 5)])
	}
	p = b.get("/admin/audit?action=tool.retire&sort=-target")
	if p.Doc.Find(`th[aria-sort="descending"] [data-testid="sort-target"]`).Length() != 1 ||
		p.Doc.Find(`input[type="hidden"][name="sort"]`).AttrOr("value", "") != "-target" ||
		p.TestID("audit-target").First().Find("[title]").AttrOr("title", "") != "tool:t9" {
		t.Errorf("reversed: first target %q", p.TestID("audit-target").First().Text())
	}
	if p := b.get("/admin/audit?sort=" + url.QueryEscape("actor DESC")); p.Status != 400 || !strings.Contains(p.TestID("audit-error").Text(), "is not an order") {
		t.Errorf("a made-up order: %d %q", p.Status, p.TestID("audit-error").Text())
	}
	// The navigation links the page for admins only.
	if b.get("/admin").Doc.Find(`nav a[href="/admin/audit"]`).Length() != 1 {
		t.Error("no Audit link for the admin")
	}
	if signedIn(t, app, "reviewer").get("/admin").Doc.Find(`nav a[href="/admin/audit"]`).Length() != 0 {
		t.Error("the reviewer is shown the Audit link")
	}
}
