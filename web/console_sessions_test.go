package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"toolbelt/models"
)

// TestAdminEndsConsoleSessions: Access lists each principal's open
// console sessions; an admin ends one and its holder must sign in again,
// while the holder's other session and everyone else's stay. Ending it
// under another principal's id (a forged form) changes nothing.
func TestAdminEndsConsoleSessions(t *testing.T) {
	t.Parallel()
	app := newTestApp(t)
	laptop, phone := signedIn(t, app, "agent"), signedIn(t, app, "agent")
	reviewer := signedIn(t, app, "reviewer")
	admin := signedIn(t, app, "admin")

	page := admin.get(fmt.Sprintf("/admin/access?open=%d", app.ids["agent"]))
	rows := page.TestID("principal-test-agent").Find(`[data-testid="console-session"]`)
	if rows.Length() != 2 || !strings.Contains(rows.First().Find(`[data-testid="session-how"]`).Text(), "API key") {
		t.Fatalf("the agent's sessions on Access: %d rows", rows.Length())
	}
	end, _ := rows.First().Find("form").Attr("action")

	// Another principal's id with the agent's session: refused, nothing ends.
	forged := strings.Replace(end, fmt.Sprintf("/principals/%d/", app.ids["agent"]), fmt.Sprintf("/principals/%d/", app.ids["reviewer"]), 1)
	if p := admin.post(forged, url.Values{}); p.Status != http.StatusNotFound {
		t.Errorf("ending the agent's session under the reviewer's id: %d", p.Status)
	}
	if p := admin.post(strings.Replace(end, "/sessions/", "/sessions/zz", 1), url.Values{}); p.Status != http.StatusBadRequest {
		t.Errorf("a malformed session id: %d", p.Status)
	}
	for name, b := range map[string]*browserClient{"laptop": laptop, "phone": phone} {
		if p := b.get("/admin"); p.Status != http.StatusOK || !strings.HasSuffix(p.URL, "/admin") {
			t.Fatalf("%s before: %d at %s", name, p.Status, p.URL)
		}
	}

	if p := admin.post(end, url.Values{}); p.Status != http.StatusOK || !strings.Contains(p.TestID("alert").Text()+p.Doc.Text(), "session ended") {
		t.Fatalf("end the session: %d", p.Status)
	}
	ended := 0
	for _, b := range []*browserClient{laptop, phone} {
		if p := b.get("/admin"); strings.Contains(p.URL, "/admin/login") {
			ended++
		}
	}
	if ended != 1 {
		t.Errorf("%d of the agent's two sessions ended, want 1", ended)
	}
	if p := reviewer.get("/admin/approvals"); p.Status != http.StatusOK || strings.Contains(p.URL, "/admin/login") {
		t.Errorf("the reviewer's session: %d at %s", p.Status, p.URL)
	}
	e := auditEntries(t, app, models.AuditSignOut)[0]
	if e["actor"] != "admin" || e["target"] != fmt.Sprintf("principal:%d", app.ids["agent"]) || e["detail"] != "ended by admin" {
		t.Errorf("the audit entry: %v", e)
	}
}
