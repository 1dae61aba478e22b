package web_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"toolbelt/models"
	"toolbelt/views"
)

// dangerousCall makes role call the dangerous overwrite_note tool (see
// dangerousWrite) and returns the waiting call's id and its approval's id.
func dangerousCall(t *testing.T, app *testApp, role, content string) (callID, approvalID string) {
	t.Helper()
	r := app.do(t, role, "POST", "/api/v1/calls", map[string]any{"tool": "overwrite_note", "session_id": "console",
		"arguments": map[string]any{"path": "note.txt", "content": content}})
	res := r.JSON(t)
	if r.Status != http.StatusAccepted || res["status"] != "awaiting_approval" {
		t.Fatalf("dangerous call: %d %v", r.Status, res)
	}
	return res["call_id"].(string), res["data"].(map[string]any)["approval_id"].(string)
}

// approvalStateOf reads an approval's state from the API.
func approvalStateOf(t *testing.T, app *testApp, id string) string {
	t.Helper()
	for _, a := range app.do(t, "admin", "GET", "/api/v1/approvals?status=all", nil).JSON(t)["approvals"].([]any) {
		if a := a.(map[string]any); a["id"] == id {
			return a["status"].(string)
		}
	}
	t.Fatalf("approval %s not found", id)
	return ""
}

func callStateOf(t *testing.T, app *testApp, id string) string {
	t.Helper()
	return app.do(t, "admin", "GET", "/api/v1/calls/"+id, nil).JSON(t)["status"].(string)
}

// TestConsoleApprovalQueue: a waiting call is listed with its requester,
// redacted arguments and time left; the fragment route is the list alone.
func TestConsoleApprovalQueue(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	dangerousWrite(t, app)
	callID, approvalID := dangerousCall(t, app, "agent", "token test-configured-secret inside")

	b := signedIn(t, app, "reviewer")
	p := b.get("/admin/approvals")
	if p.Status != 200 || p.TestID("nav-Approvals").AttrOr("aria-current", "") != "page" {
		t.Fatalf("approvals page: %d", p.Status)
	}
	row := p.TestID("approval-" + approvalID)
	if row.Length() != 1 {
		t.Fatalf("approval %s not listed: %s", approvalID, p.TestID("pending-approvals").Text())
	}
	if got := row.Find(`[data-testid="approval-tool"]`).Text(); got != "overwrite_note" {
		t.Errorf("tool %q", got)
	}
	if got := row.Find(`[data-testid="approval-requester"]`).Text(); got != "test-agent" {
		t.Errorf("requester %q", got)
	}
	// Approvals last 15 minutes by default; the page counts down to it.
	if got := row.Find(`[data-testid="approval-left"]`).Text(); !strings.HasSuffix(got, "left") || !strings.Contains(got, "min") {
		t.Errorf("time left %q", got)
	}
	args := row.Find(`[data-testid="approval-arguments"]`).Text()
	if !strings.Contains(args, `"path": "note.txt"`) || strings.Contains(args, "test-configured-secret") {
		t.Errorf("arguments not shown redacted: %s", args)
	}
	if href := row.Find(`a[href="/admin/calls/` + callID + `"]`); href.Length() != 1 {
		t.Error("no link to the waiting call")
	}
	// Each reason field has its label; both decisions are buttons of the form.
	if p.Doc.Find(`label[for="reason-`+approvalID+`"]`).Length() != 1 || p.TestID("approve-"+approvalID).Length() != 1 || p.TestID("deny-"+approvalID).Length() != 1 {
		t.Error("the decision form lacks its label or buttons")
	}
	// The queue polls its fragment, which is the list alone.
	list := p.TestID("pending-approvals")
	if list.AttrOr("hx-get", "") != "/admin/approvals/pending" || !strings.Contains(list.AttrOr("hx-trigger", ""), "every") {
		t.Errorf("the queue does not refresh itself: %v", list.Nodes[0].Attr)
	}
	if p.TestID("refresh").AttrOr("href", "") != "/admin/approvals" {
		t.Error("no refresh link for browsers without JavaScript")
	}
	frag := b.get("/admin/approvals/pending")
	if frag.Status != 200 || frag.TestID("approval-"+approvalID).Length() != 1 {
		t.Fatalf("fragment: %d", frag.Status)
	}
	if frag.Doc.Find("body").Children().Length() != 1 || frag.TestID("pending-approvals").Length() != 1 ||
		frag.Doc.Find("nav, h1, title, header").Length() != 0 {
		html, _ := frag.Doc.Html()
		t.Errorf("the fragment is more than the list:\n%s", html)
	}
	if frag.Doc.Find(`form input[name="_csrf"]`).AttrOr("value", "") == "" {
		t.Error("the fragment's forms carry no CSRF token")
	}

	// The waiting call's page sends a reviewer to the queue, not its agent.
	d := b.get("/admin/calls/" + callID)
	if d.TestID("call-status").Text() != "awaiting approval" || d.TestID("call-waiting").Find(`a[href="/admin/approvals"]`).Length() != 1 || d.TestID("call-error").Length() != 0 {
		t.Errorf("waiting call page for a reviewer: %q", d.Doc.Find("main").Text())
	}
	if d := signedIn(t, app, "agent").get("/admin/calls/" + callID); d.Status != 200 || d.TestID("call-waiting").Length() != 0 {
		t.Errorf("waiting call page for its agent: %d", d.Status)
	}
}

// TestConsoleDecisions: a denial needs a reason (the error is beside the
// field, nothing changes); approving runs the call, which the history
// shows as succeeded; the decided list says who decided.
func TestConsoleDecisions(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	dangerousWrite(t, app)
	denyCall, denyID := dangerousCall(t, app, "agent", "to deny")
	okCall, okID := dangerousCall(t, app, "agent", "to approve")
	b := signedIn(t, app, "reviewer")
	b.get("/admin/approvals")

	// Deny without a reason: 422, error beside the reason, nothing changed.
	p := b.post("/admin/approvals/"+denyID+"/deny", url.Values{"reason": {"   "}})
	if p.Status != http.StatusUnprocessableEntity {
		t.Fatalf("deny without reason: %d", p.Status)
	}
	if got := p.TestID("error-reason-" + denyID).Text(); !strings.Contains(got, "required when denying") {
		t.Errorf("reason error %q", got)
	}
	field := p.TestID("reason-" + denyID)
	if field.AttrOr("aria-invalid", "") != "true" || field.AttrOr("aria-describedby", "") != "reason-"+denyID+"-error" {
		t.Error("the reason field is not marked invalid")
	}
	if p.TestID("error-reason-"+okID).Length() != 0 {
		t.Error("the error shows on another approval too")
	}
	if p.TestID("pending-approvals").AttrOr("hx-get", "") != "" {
		t.Error("the queue polls while an error is on screen (it would wipe it)")
	}
	if s := approvalStateOf(t, app, denyID); s != "pending" {
		t.Fatalf("a refused denial changed the approval: %s", s)
	}
	if s := callStateOf(t, app, denyCall); s != "awaiting_approval" {
		t.Fatalf("a refused denial changed the call: %s", s)
	}

	// Deny with a reason: back to the queue with a notice; the call ends.
	p = b.post("/admin/approvals/"+denyID+"/deny", url.Values{"reason": {"notes are read-only today"}})
	if p.Status != 200 || !strings.HasSuffix(strings.SplitN(p.URL, "?", 2)[0], "/admin/approvals") || !strings.Contains(p.TestID("notice").Text(), "Denied") {
		t.Fatalf("deny: %d %s %q", p.Status, p.URL, p.TestID("notice").Text())
	}
	if p.TestID("approval-"+denyID).Length() != 0 {
		t.Error("a denied approval is still in the queue")
	}
	row := p.TestID("decided-" + denyID)
	if row.Find(`[data-testid="decided-status"]`).Text() != "denied" || row.Find(`[data-testid="decided-by"]`).Text() != "test-reviewer" ||
		row.Find(`[data-testid="decided-reason"]`).Text() != "notes are read-only today" {
		t.Errorf("decided row: %q", row.Text())
	}
	if s := callStateOf(t, app, denyCall); s != "failed" {
		t.Errorf("denied call: %s", s)
	}

	// Approve: the call runs and the history shows it succeeded.
	p = b.post("/admin/approvals/"+okID+"/approve", url.Values{"reason": {""}})
	if p.Status != 200 || !strings.Contains(p.TestID("notice").Text(), "Approved") {
		t.Fatalf("approve: %d %q", p.Status, p.TestID("notice").Text())
	}
	if rec := app.poll(t, "agent", okCall); rec["status"] != "succeeded" {
		t.Fatalf("approved call: %v", rec)
	}
	h := b.get("/admin/calls?tool=overwrite_note")
	var status string
	h.TestID("call-row").Each(func(_ int, r *goquery.Selection) {
		if r.AttrOr("data-call-id", "") == okCall {
			status = r.Find(`[data-testid="call-status"]`).Text()
		}
	})
	if status != "succeeded" {
		t.Errorf("history shows the approved call as %q", status)
	}
	// Each call's page says who decided, when and why, and the wait apart.
	for _, tc := range []struct{ call, status, reason string }{{denyCall, "denied", "notes are read-only today"}, {okCall, "approved", ""}} {
		d := b.get("/admin/calls/" + tc.call)
		if d.TestID("decision-status").Text() != tc.status || d.TestID("decision-by").Text() != "test-reviewer" || d.TestID("decision-at").Length() != 1 ||
			d.TestID("decision-reason").Text() != tc.reason || d.TestID("call-approval-ms").Length() != 1 {
			t.Errorf("call page of the %s call: %q", tc.status, strings.Join(strings.Fields(d.TestID("call-decision").Text()), " "))
		}
	}
	d := b.get("/admin/calls/" + okCall)
	if !strings.Contains(d.TestID("call-total-ms").Text(), "the approval wait included") {
		t.Errorf("the approved call's total does not say it includes the wait: %q", d.TestID("call-total-ms").Text())
	}
	// Its stages are those of the run the approval resumed, with the wait
	// for the reviewer just before the approve guard that used it.
	var stages []string
	d.TestID("call-stage").Each(func(_ int, r *goquery.Selection) { stages = append(stages, r.Find("td").First().Text()) })
	if want := "resolve validate authorize waiting for approval approve secure cache limit queue execute attempt 1"; strings.Join(stages, " ") != want {
		t.Errorf("the approved call's stages: %q, want %q", strings.Join(stages, " "), want)
	}
	p = b.get("/admin/approvals")
	if got := p.TestID("decided-" + okID).Find(`[data-testid="decided-status"]`).Text(); got != "approved · succeeded" {
		t.Errorf("approved row status %q", got)
	}
	if p.TestID("pending-empty").Length() != 1 {
		t.Error("the queue is not empty after both decisions")
	}

	// A decision on an approval no longer pending is refused with a message.
	p = b.post("/admin/approvals/"+okID+"/approve", url.Values{})
	if p.Status != http.StatusConflict || !strings.Contains(p.TestID("approvals-error").Text(), "is used") {
		t.Errorf("deciding twice: %d %q", p.Status, p.TestID("approvals-error").Text())
	}
}

// TestConsoleSelfApproval: nobody decides their own call, and the page
// says why.
func TestConsoleSelfApproval(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	dangerousWrite(t, app)
	callID, approvalID := dangerousCall(t, app, "admin", "mine")
	b := signedIn(t, app, "admin")
	p := b.get("/admin/approvals")
	if p.TestID("own-"+approvalID).Length() != 1 || p.TestID("decide-"+approvalID).Length() != 0 {
		t.Error("the queue offers an admin to decide their own call")
	}
	p = b.post("/admin/approvals/"+approvalID+"/approve", url.Values{"reason": {"looks fine"}})
	if p.Status != http.StatusForbidden {
		t.Fatalf("self-approval: %d", p.Status)
	}
	if got := p.TestID("error-" + approvalID).Text(); got != "You made this call; another reviewer must decide it." {
		t.Errorf("self-approval message %q", got)
	}
	if s := approvalStateOf(t, app, approvalID); s != "pending" {
		t.Errorf("self-approval changed the approval: %s", s)
	}
	if s := callStateOf(t, app, callID); s != "awaiting_approval" {
		t.Errorf("self-approval changed the call: %s", s)
	}
	// Another decider may.
	r := signedIn(t, app, "reviewer")
	r.get("/admin/approvals")
	if p := r.post("/admin/approvals/"+approvalID+"/approve", url.Values{}); p.Status != 200 {
		t.Errorf("reviewer approving the admin's call: %d", p.Status)
	}
}

// TestConsoleExpiredApproval: an approval past its time leaves the queue
// for the decided list, and deciding it is refused with the reason.
func TestConsoleExpiredApproval(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	dangerousWrite(t, app)
	callID, approvalID := dangerousCall(t, app, "agent", "too late")
	b := signedIn(t, app, "reviewer")
	b.get("/admin/approvals")
	if err := app.store.DB().Model(&models.Approval{}).Where("id = ?", approvalID).Update("expires_at", time.Now().Add(-time.Minute)).Error; err != nil {
		t.Fatal(err)
	}
	p := b.post("/admin/approvals/"+approvalID+"/approve", url.Values{})
	if p.Status != http.StatusConflict || !strings.Contains(p.TestID("approvals-error").Text(), "expired at") {
		t.Fatalf("approving an expired call: %d %q", p.Status, p.TestID("approvals-error").Text())
	}
	if p.TestID("approval-"+approvalID).Length() != 0 || p.TestID("pending-empty").Length() != 1 {
		t.Error("the expired approval is still in the queue")
	}
	row := p.TestID("decided-" + approvalID)
	if row.Find(`[data-testid="decided-status"]`).Text() != "expired" || row.Find(`[data-testid="decided-by"]`).Text() != "—" {
		t.Errorf("expired row: %q", row.Text())
	}
	if s := callStateOf(t, app, callID); s != "failed" {
		t.Errorf("expired call: %s", s)
	}
}

// TestConsoleAgentView: an agent may not open the approvals and sees only
// its own calls.
func TestConsoleAgentView(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	app.call(t, "admin", map[string]any{"tool": "file_write", "session_id": "adm", "arguments": map[string]any{"path": "a.txt", "content": "x"}})
	agent := fmt.Sprint(app.ids["agent"])
	app.do(t, "admin", "PUT", "/api/v1/principals/"+agent+"/grants", map[string]any{"categories": []string{"filesystem"}})
	_, own := app.call(t, "agent", map[string]any{"tool": "file_list", "session_id": "mine", "arguments": map[string]any{}})
	adminCalls := app.do(t, "admin", "GET", "/api/v1/calls?principal=1", nil).JSON(t)["calls"].([]any)
	if len(adminCalls) != 1 {
		t.Fatalf("admin calls: %v", adminCalls)
	}
	adminCall := adminCalls[0].(map[string]any)["id"].(string)

	b := signedIn(t, app, "agent")
	for _, path := range []string{"/admin/approvals", "/admin/approvals/pending"} {
		if p := b.get(path); p.Status != 403 || p.TestID("error-page").Length() != 1 {
			t.Errorf("agent on %s: %d", path, p.Status)
		}
	}
	if p := b.post("/admin/approvals/x/approve", url.Values{}); p.Status != 403 {
		t.Errorf("agent approving: %d", p.Status)
	}
	p := b.get("/admin/calls")
	if p.Status != 200 || p.TestID("nav-Approvals").Length() != 0 || p.TestID("nav-History").Length() != 1 {
		t.Fatalf("agent history: %d", p.Status)
	}
	rows := p.TestID("call-row")
	if rows.Length() != 1 || rows.AttrOr("data-call-id", "") != own["call_id"] || rows.Find(`[data-testid="call-principal"]`).Text() != "test-agent" {
		t.Fatalf("agent sees %d calls: %s", rows.Length(), rows.Text())
	}
	if p.Doc.Find("#filter-principal").Length() != 0 {
		t.Error("an agent is offered the principal filter")
	}
	// Asking for someone else's calls changes nothing; their detail is a 404.
	if p := b.get("/admin/calls?principal=1"); p.TestID("call-row").Length() != 1 {
		t.Errorf("principal=1 shows an agent %d calls", p.TestID("call-row").Length())
	}
	if p := b.get("/admin/calls/" + adminCall); p.Status != 404 {
		t.Errorf("agent opening the admin's call: %d", p.Status)
	}
	if p := b.get("/admin/calls/" + own["call_id"].(string)); p.Status != 200 || p.TestID("call-tool").Text() != "file_list" {
		t.Errorf("agent opening its call: %d", p.Status)
	}
}

// seedCallHistory stores n calls, one a minute back from start: tools,
// statuses, principals and sessions rotate so filters have work to do.
func seedCallHistory(t testing.TB, app *testApp, n int, start time.Time, principals []uint) []*models.Call {
	t.Helper()
	tools := []string{"file_read", "file_write", "web_search"}
	statuses := []string{"succeeded", "succeeded", "failed", "refused"}
	var out []*models.Call
	for i := range n {
		fin := start.Add(-time.Duration(i)*time.Minute + 40*time.Millisecond)
		c := &models.Call{ID: fmt.Sprintf("seed%06d", i), PrincipalID: principals[i%len(principals)], SessionID: fmt.Sprintf("s%d", i%5),
			Tool: tools[i%3], Version: "1.0.0", Arguments: `{"i":` + fmt.Sprint(i) + `}`, Status: statuses[i%4],
			Result: `{"status":"` + statuses[i%4] + `"}`, Attempts: 1, QueueMs: 2, RunMs: 30, TotalMs: 40,
			CreatedAt: start.Add(-time.Duration(i) * time.Minute), FinishedAt: &fin}
		out = append(out, c)
	}
	for i := 0; i < len(out); i += 200 {
		if err := app.store.SaveCalls(context.Background(), out[i:min(i+200, len(out))]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestConsoleCallHistory: filters, pagination and their errors over 120
// calls.
func TestConsoleCallHistory(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	seedCallHistory(t, app, 120, start, []uint{app.ids["admin"], app.ids["agent"]})
	b := signedIn(t, app, "reviewer")

	ids := func(p page) []string {
		var out []string
		p.TestID("call-row").Each(func(_ int, s *goquery.Selection) { out = append(out, s.AttrOr("data-call-id", "")) })
		return out
	}
	p := b.get("/admin/calls")
	if got := ids(p); len(got) != 50 || got[0] != "seed000000" || got[49] != "seed000049" {
		t.Fatalf("page 1: %d rows %v", len(got), got)
	}
	if got := p.TestID("calls-total").Text(); !strings.Contains(got, "1–50 of 120") {
		t.Errorf("total %q", got)
	}
	if p.TestID("prev").Length() != 0 || p.TestID("next").AttrOr("href", "") != "/admin/calls?page=2" || p.TestID("page-of").Text() != "Page 1 of 3" {
		t.Errorf("pager on page 1: %q", p.TestID("pager").Text())
	}
	p = b.get(p.TestID("next").AttrOr("href", ""))
	if got := ids(p); len(got) != 50 || got[0] != "seed000050" {
		t.Errorf("page 2: %v", got)
	}
	p = b.get(p.TestID("next").AttrOr("href", ""))
	if got := ids(p); len(got) != 20 || got[19] != "seed000119" || p.TestID("next").Length() != 0 || p.TestID("prev").AttrOr("href", "") != "/admin/calls?page=2" {
		t.Errorf("page 3: %d rows, pager %q", len(got), p.TestID("pager").Text())
	}
	if got := p.TestID("calls-total").Text(); !strings.Contains(got, "101–120 of 120") {
		t.Errorf("total on page 3 %q", got)
	}
	// A row's time opens the call, its tool name the tool.
	link, tool := p.TestID("call-link").First(), p.TestID("call-tool-link").First()
	if link.AttrOr("href", "") != "/admin/calls/seed000100" || tool.AttrOr("href", "") != "/admin/tools/file_write" || tool.Text() != "file_write" {
		t.Errorf("row links %v, %v %q", link.AttrOr("href", ""), tool.AttrOr("href", ""), tool.Text())
	}

	// The less used filters fold away unless one of them is set.
	if _, open := p.TestID("more-filters").Attr("open"); open || p.TestID("more-filters").Length() != 1 {
		t.Error("the principal, session and time filters are open with none set")
	}
	if _, open := b.get("/admin/calls?session=s3").TestID("more-filters").Attr("open"); !open {
		t.Error("a session filter set, its row is folded")
	}
	if _, open := b.get("/admin/calls?status=failed").TestID("more-filters").Attr("open"); open {
		t.Error("a status filter set, the other row opened")
	}

	// Filters combine, are kept in the form and in the pager's links.
	agent := fmt.Sprint(app.ids["agent"])
	cases := []struct {
		query string
		want  int // matching calls
	}{
		{"status=failed", 30},
		{"tool=web_search", 40},
		{"principal=" + agent, 60},
		{"session=s3", 24},
		{"tool=file_read&status=succeeded", 20},               // i%3==0 and i%4 in {0,1}
		{"since=2026-03-01T11:00&until=2026-03-01T12:00", 60}, // i in 1..60
		{"since=2026-03-01T11:00:30", 60},                     // i 0..59
		{"until=" + url.QueryEscape(start.Add(-100*time.Minute).Format(time.RFC3339)), 19}, // i 101..119
		{"tool=nope", 0},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			p := b.get("/admin/calls?" + tc.query)
			if p.Status != 200 {
				t.Fatalf("status %d", p.Status)
			}
			if tc.want == 0 {
				if p.TestID("calls-empty").Length() != 1 || p.TestID("clear-filters").Length() != 1 {
					t.Errorf("no empty state: %q", p.Doc.Find("main").Text())
				}
				return
			}
			want := fmt.Sprintf("of %d,", tc.want)
			if got := p.TestID("calls-total").Text(); !strings.Contains(got, want) {
				t.Errorf("total %q, want %q", got, want)
			}
			if got := len(ids(p)); got != min(tc.want, 50) {
				t.Errorf("%d rows", got)
			}
			if next := p.TestID("next").AttrOr("href", ""); tc.want > 50 {
				q, _ := url.Parse(next)
				orig, _ := url.ParseQuery(tc.query)
				for k := range orig {
					if q.Query().Get(k) == "" {
						t.Errorf("next link %q drops %s", next, k)
					}
				}
			}
		})
	}
	// A time from a hand-made link is kept to the millisecond in the form.
	p = b.get("/admin/calls?since=" + url.QueryEscape("2026-03-01T11:00:30.25Z"))
	if v := p.Doc.Find("#filter-since").AttrOr("value", ""); v != "2026-03-01T11:00:30.25" || !strings.Contains(p.TestID("calls-total").Text(), "of 60,") {
		t.Errorf("since kept as %q, %q", v, p.TestID("calls-total").Text())
	}
	p = b.get("/admin/calls?status=refused&principal=" + agent)
	if v := p.Doc.Find("#filter-status option[selected]").AttrOr("value", ""); v != "refused" {
		t.Errorf("status filter not kept: %q", v)
	}
	if v := p.Doc.Find("#filter-principal option[selected]").Text(); v != "test-agent (agent)" {
		t.Errorf("principal filter not kept: %q", v)
	}
	if p.TestID("call-row").Length() == 0 {
		t.Fatal("no refused call of the agent listed (the seed gives the agent the odd calls, and call i the status statuses[i%4])")
	}
	p.TestID("call-row").Each(func(_ int, r *goquery.Selection) {
		if r.Find(`[data-testid="call-status"]`).Text() != "refused" || r.Find(`[data-testid="call-principal"]`).Text() != "test-agent" {
			t.Errorf("row outside the filter: %q", r.Text())
		}
	})

	// Bad filters: 400, the error beside its field, no list.
	bad := []struct{ query, field, want string }{
		{"status=exploded", "status", `"exploded" is not a call status`},
		{"since=yesterday", "since", `"yesterday" is not a date and time`},
		{"since=2026-03-01T12:00&until=2026-03-01T11:00", "until", "later than the From time"},
		{"principal=999", "principal", `No principal has the id "999"`},
		{"principal=abc", "principal", `No principal has the id "abc"`},
		{"page=0", "page", `Page "0" does not exist`},
		{"session=" + strings.Repeat("x", 129), "session", "at most 128"},
	}
	for _, tc := range bad {
		t.Run("bad "+tc.query[:min(len(tc.query), 30)], func(t *testing.T) {
			p := b.get("/admin/calls?" + tc.query)
			if p.Status != http.StatusBadRequest || p.TestID("call-row").Length() != 0 || p.TestID("calls-invalid").Length() != 1 {
				t.Fatalf("status %d, %d rows", p.Status, p.TestID("call-row").Length())
			}
			if got := p.TestID("error-" + tc.field).Text(); !strings.Contains(got, tc.want) {
				t.Errorf("error %q, want %q", got, tc.want)
			}
			if tc.field != "page" {
				if in := p.Doc.Find("#filter-" + tc.field); in.AttrOr("aria-invalid", "") != "true" || in.AttrOr("aria-describedby", "") != "filter-"+tc.field+"-error" {
					t.Error("the field is not marked invalid")
				}
			}
		})
	}
	// Past the last page: no rows, a way back.
	p = b.get("/admin/calls?page=9")
	if p.Status != 200 || p.TestID("call-row").Length() != 0 || p.TestID("prev").AttrOr("href", "") != "/admin/calls?page=3" {
		t.Errorf("past the end: %d %q", p.Status, p.TestID("pager").Text())
	}
}

// TestConsoleCallHistorySorted: every column's header orders the whole
// history, across pages, as a sort of the calls gives (the newest first
// within a value); a second click reverses it; the order is kept by the
// pager and the filter form, and stays with a filter; a made-up order is
// 400 with no list.
func TestConsoleCallHistorySorted(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tools := []string{"web_search", "file_read", "file_write"}
	statuses := []string{"succeeded", "failed", "refused"}
	var calls []*models.Call
	for i := range 120 {
		calls = append(calls, &models.Call{ID: fmt.Sprintf("seed%06d", i), PrincipalID: []uint{app.ids["agent"], app.ids["admin"]}[i%2],
			SessionID: "s", Tool: tools[i%3], Version: "1.0.0", Arguments: "{}", Status: statuses[i%len(statuses)],
			TotalMs: int64((i * 37) % 101), CreatedAt: start.Add(-time.Duration(i) * time.Minute)})
	}
	if err := app.store.SaveCalls(context.Background(), calls); err != nil {
		t.Fatal(err)
	}
	b := signedIn(t, app, "reviewer")
	// all follows the pager from u and returns the calls listed, each
	// with its row.
	all := func(u string) (ids []string, rows map[string]*goquery.Selection) {
		rows = map[string]*goquery.Selection{}
		for u != "" {
			p := b.get(u)
			if p.Status != 200 {
				t.Fatalf("%s: %d", u, p.Status)
			}
			p.TestID("call-row").Each(func(_ int, s *goquery.Selection) {
				id := s.AttrOr("data-call-id", "")
				ids, rows[id] = append(ids, id), s
			})
			u = p.TestID("next").AttrOr("href", "")
			if u != "" && !strings.Contains(u, "sort=") && strings.Contains(p.URL, "sort=") {
				t.Fatalf("the next page's link %q drops the order", u)
			}
		}
		return ids, rows
	}
	_, rows := all("/admin/calls")
	home := b.get("/admin/calls")
	for _, col := range []string{"tool", "status", "principal", "duration", "time"} {
		for _, reversed := range []bool{false, true} {
			sort := col
			if reversed {
				sort = "-" + col
			}
			// The header links to this order: a first click (on the
			// newest-first page) to col, a second (on the page ordered by
			// col) to its reverse; time is already newest first, so its
			// first click gives the oldest first, its second the newest.
			from := home
			if sort == "-"+col {
				from = b.get("/admin/calls?sort=" + col)
			}
			if href := from.TestID("sort-"+col).AttrOr("href", ""); href != "/admin/calls?sort="+url.QueryEscape(sort) {
				t.Errorf("%s: the header on %s links %q", sort, from.URL, href)
			}
			key := func(c *models.Call) string {
				switch col {
				case "tool":
					return c.Tool
				case "status":
					return c.Status
				case "principal":
					return rows[c.ID].Find(`[data-testid="call-principal"]`).Text()
				case "duration":
					return fmt.Sprintf("%06d", c.TotalMs)
				}
				return c.CreatedAt.Format(time.RFC3339)
			}
			want := slices.Clone(calls)
			slices.SortStableFunc(want, func(a, c *models.Call) int {
				by := strings.Compare(key(a), key(c))
				if reversed {
					by = -by
				}
				return cmp.Or(by, c.CreatedAt.Compare(a.CreatedAt))
			})
			var wantIDs []string
			for _, c := range want {
				wantIDs = append(wantIDs, c.ID)
			}
			got, _ := all("/admin/calls?sort=" + url.QueryEscape(sort))
			if !slices.Equal(got, wantIDs) {
				t.Errorf("sort %s: %d calls\n got %v\nwant %v", sort, len(got), got[:min(len(got), 8)], wantIDs[:8])
			}
		}
	}
	p := b.get("/admin/calls?sort=-duration&status=failed")
	if p.Doc.Find(`input[type="hidden"][name="sort"]`).AttrOr("value", "") != "-duration" ||
		p.Doc.Find(`th[aria-sort="descending"] [data-testid="sort-duration"]`).Length() != 1 ||
		!strings.Contains(p.TestID("calls-total").Text(), "slowest first") {
		t.Errorf("the filter form or the header lost the order: %q", p.TestID("calls-total").Text())
	}
	p.TestID("call-row").Each(func(_ int, s *goquery.Selection) {
		if s.Find(`[data-testid="call-status"]`).Text() != "failed" {
			t.Errorf("a %s call under status=failed", s.Find(`[data-testid="call-status"]`).Text())
		}
	})
	for _, bad := range []string{"id", "-", "duration DESC", "(SELECT 1)", "time;DROP TABLE calls"} {
		p := b.get("/admin/calls?sort=" + url.QueryEscape(bad))
		if p.Status != http.StatusBadRequest || p.TestID("call-row").Length() != 0 || !strings.Contains(p.TestID("error-sort").Text(), "cannot be ordered by") {
			t.Errorf("sort=%q: %d, %q", bad, p.Status, p.TestID("error-sort").Text())
		}
	}
}

// TestConsoleCallHistoryDepth: pages stop at 200; the last one continues
// with an earlier Until rather than a deeper offset.
func TestConsoleCallHistoryDepth(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	seedCallHistory(t, app, 10_060, start, []uint{app.ids["admin"]})
	b := signedIn(t, app, "admin")
	if p := b.get("/admin/calls?page=201"); p.Status != http.StatusBadRequest || !strings.Contains(p.TestID("error-page").Text(), "set Until to an earlier time") {
		t.Fatalf("page 201: %d %q", p.Status, p.TestID("error-page").Text())
	}
	p := b.get("/admin/calls?page=200")
	rows := p.TestID("call-row")
	if rows.Length() != 50 || rows.Last().AttrOr("data-call-id", "") != "seed009999" || p.TestID("page-of").Text() != "Page 200 of 202" {
		t.Fatalf("page 200: %d rows, %q", rows.Length(), p.TestID("page-of").Text())
	}
	next := p.TestID("next").AttrOr("href", "")
	want := "/admin/calls?until=" + url.QueryEscape(start.Add(-9999*time.Minute).Format("2006-01-02T15:04"))
	if next != want {
		t.Fatalf("next from the last page %q, want %q", next, want)
	}
	p = b.get(next)
	if first := p.TestID("call-row").First().AttrOr("data-call-id", ""); first != "seed010000" || !strings.Contains(p.TestID("calls-total").Text(), "of 60,") {
		t.Errorf("older calls start at %s, %q", first, p.TestID("calls-total").Text())
	}
}

// TestConsoleCallDetail: a failed call's page shows its timings and the
// error's code, message and suggestion; a succeeded one its result.
func TestConsoleCallDetail(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	_, failed := app.call(t, "admin", map[string]any{"tool": "file_read", "session_id": "d1", "arguments": map[string]any{"path": "missing.txt"}})
	_, ok := app.call(t, "admin", map[string]any{"tool": "file_write", "session_id": "d1", "arguments": map[string]any{"path": "w.txt", "content": "hi there"}})
	rec := app.do(t, "admin", "GET", "/api/v1/calls/"+failed["call_id"].(string), nil).JSON(t)

	b := signedIn(t, app, "reviewer")
	p := b.get("/admin/calls/" + failed["call_id"].(string))
	if p.Status != 200 {
		t.Fatalf("detail: %d", p.Status)
	}
	want := map[string]string{
		"call-tool":             "file_read",
		"call-version":          "v1.0.0",
		"call-status":           "failed",
		"call-principal":        "admin",
		"call-session":          "d1",
		"call-attempts":         "1",
		"call-cached":           "no",
		"call-queue-ms":         views.CallMillis(int64(rec["queue_ms"].(float64))),
		"call-run-ms":           views.CallMillis(int64(rec["run_ms"].(float64))),
		"call-total-ms":         views.CallMillis(int64(rec["total_ms"].(float64))),
		"call-error-code":       "EXECUTION_FAILED",
		"call-error-suggestion": "List the directory with file_list to see which files exist.",
	}
	for id, w := range want {
		if got := strings.TrimSpace(p.TestID(id).Text()); got != w {
			t.Errorf("%s = %q, want %q", id, got, w)
		}
	}
	if got := p.TestID("call-error-message").Text(); !strings.Contains(got, "missing.txt does not exist") {
		t.Errorf("error message %q", got)
	}
	// Linked to its tool, its principal's and its session's calls; the
	// error comes before the timings and the stages.
	links := map[string]string{"call-tool": "/admin/tools/file_read", "call-principal": "/admin/calls?principal=1", "call-session": "/admin/calls?session=d1"}
	for id, href := range links {
		if got := p.Doc.Find(`[data-testid="`+id+`"]`).Find("a").AddBack().Filter("a").AttrOr("href", ""); got != href {
			t.Errorf("%s links to %q, want %q", id, got, href)
		}
	}
	if html, _ := p.Doc.Find("main").Html(); strings.Index(html, `data-testid="call-error"`) > strings.Index(html, `data-testid="call-timings"`) {
		t.Error("the error comes after the timings")
	}
	if !strings.Contains(p.TestID("call-created").Text(), "UTC") || !strings.Contains(p.TestID("call-finished").Text(), "UTC") {
		t.Errorf("times: %q / %q", p.TestID("call-created").Text(), p.TestID("call-finished").Text())
	}
	if got := p.TestID("call-arguments").Text(); !strings.Contains(got, `"path": "missing.txt"`) {
		t.Errorf("arguments %q", got)
	}

	p = b.get("/admin/calls/" + ok["call_id"].(string))
	if p.TestID("call-status").Text() != "succeeded" || p.TestID("call-error").Length() != 0 || !strings.Contains(p.TestID("call-result").Text(), `"bytes_written": 8`) {
		t.Errorf("succeeded call: %q result %q", p.TestID("call-status").Text(), p.TestID("call-result").Text())
	}
	// The timing bar splits the total into queue, run and the rest.
	seeded := seedCallHistory(t, app, 1, time.Now().UTC(), []uint{app.ids["agent"]})[0]
	p = b.get("/admin/calls/" + seeded.ID)
	var widths []string
	p.TestID("call-stages").Find("rect").Each(func(_ int, r *goquery.Selection) {
		widths = append(widths, r.AttrOr("class", "")+" "+r.AttrOr("width", ""))
	})
	if got := strings.Join(widths, ", "); got != "queue 5.00, run 75.00, other 20.00" {
		t.Errorf("stages %q of queue 2 ms, run 30 ms, total 40 ms", got)
	}
	if p := b.get("/admin/calls/nosuchcall"); p.Status != 404 || p.TestID("error-page").Length() != 1 {
		t.Errorf("unknown call: %d", p.Status)
	}
}

// BenchmarkConsoleCallsPage renders history pages over 100,000 calls
// (the bar: under 50 ms each, server side).
func BenchmarkConsoleCallsPage(b *testing.B) {
	app := newTestApp(b)
	seedCallHistory(b, app, 100_000, time.Now().UTC(), []uint{app.ids["admin"], app.ids["agent"], app.ids["reviewer"]})
	admin, agent := signedIn(b, app, "admin"), signedIn(b, app, "agent")
	for _, bc := range []struct {
		name string
		b    *browserClient
		path string
	}{
		{"newest", admin, "/admin/calls"},
		{"page 200", admin, "/admin/calls?page=200"},
		{"status", admin, "/admin/calls?status=failed"},
		{"tool and status", admin, "/admin/calls?tool=web_search&status=refused"},
		{"session", admin, "/admin/calls?session=s3"},
		{"last hour", admin, "/admin/calls?since=" + time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")},
		{"agent", agent, "/admin/calls"},
		{"detail", admin, "/admin/calls/seed050000"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if p := bc.b.get(bc.path); p.Status != 200 {
					b.Fatalf("%s: %d", bc.path, p.Status)
				}
			}
		})
	}
}

// TestConsoleApprovalOfARefusedCall: a dangerous call the security checks
// will refuse (a chained shell command) carries that warning in the queue
// before anyone approves it, a plain one does not; approved anyway, it is
// refused without running (no attempt, the file the chain would write is
// not there), and the decided list says so instead of "ran".
func TestConsoleApprovalOfARefusedCall(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	marker := filepath.Join(t.TempDir(), "chained")
	shell := func(command string) (callID, approvalID string) {
		r := app.do(t, "admin", "POST", "/api/v1/calls", map[string]any{"tool": "shell_exec", "session_id": "console",
			"arguments": map[string]any{"command": command}})
		res := r.JSON(t)
		if r.Status != http.StatusAccepted || res["status"] != "awaiting_approval" {
			t.Fatalf("shell call: %d %v", r.Status, res)
		}
		return res["call_id"].(string), res["data"].(map[string]any)["approval_id"].(string)
	}
	badCall, badID := shell("ls && touch " + marker)
	_, plainID := shell("ls")

	b := signedIn(t, app, "reviewer")
	p := b.get("/admin/approvals")
	if w := p.TestID("refusal-" + badID).Text(); !strings.Contains(w, "COMMAND_REJECTED") || !strings.Contains(w, "runs nothing") {
		t.Errorf("warning on the chained command %q", w)
	}
	if p.TestID("refusal-"+plainID).Length() != 0 {
		t.Error("the plain command is flagged too")
	}

	if p = b.post("/admin/approvals/"+badID+"/approve", url.Values{"reason": {""}}); p.Status != 200 {
		t.Fatalf("approve: %d", p.Status)
	}
	if rec := app.poll(t, "admin", badCall); rec["status"] != "refused" || rec["error_code"] != "COMMAND_REJECTED" || rec["attempts"] != float64(0) {
		t.Fatalf("approved chained command: %v", rec)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the chained command ran on the host: %v", err)
	}
	row := b.get("/admin/approvals").TestID("decided-" + badID).Find(`[data-testid="decided-status"]`)
	if got := row.Text(); got != "approved · refused COMMAND_REJECTED" || !row.HasClass("refused") {
		t.Errorf("decided row %q (class %q)", got, row.AttrOr("class", ""))
	}
}

// TestConsoleDecisionPanel: a waiting call's card says what a reviewer
// decides on: the tool's level and why it needs approval, what the tool
// does (linked), the session and the task the agent selected tools for,
// what the security checks read in the arguments (the path in the work
// directory; a shell command as the shell splits it) and the latest
// decisions on the same tool. Another agent's task in a session of the
// same name is never shown.
func TestConsoleDecisionPanel(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	dangerousWrite(t, app)
	if r := app.do(t, "agent", "POST", "/api/v1/tools/select", map[string]any{"query": "save the meeting notes to a file", "session_id": "console"}); r.Status != 200 {
		t.Fatalf("select: %d %s", r.Status, r.Body)
	}
	// The admin selects later in a session named like the agent's: that
	// task is the admin's, never shown as the agent's.
	app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": "the admin's secret plan", "session_id": "console"})
	app.invoker.Flush()
	_, first := dangerousCall(t, app, "agent", "first draft")
	if r := app.do(t, "reviewer", "POST", "/api/v1/approvals/"+first+"/deny", map[string]any{"reason": "drafts stay local"}); r.Status != 200 {
		t.Fatalf("deny: %d %s", r.Status, r.Body)
	}
	_, waiting := dangerousCall(t, app, "agent", "final notes")
	r := app.do(t, "admin", "POST", "/api/v1/calls", map[string]any{"tool": "shell_exec", "session_id": "ops",
		"arguments": map[string]any{"command": `rm -rf "old notes"`}})
	shell := r.JSON(t)["data"].(map[string]any)["approval_id"].(string)

	p := signedIn(t, app, "reviewer").get("/admin/approvals")
	card := p.TestID("approval-" + waiting)
	text := func(id string) string {
		return strings.Join(strings.Fields(card.Find(`[data-testid="`+id+`"]`).Text()), " ")
	}
	if card.Find(`a[data-testid="approval-tool"]`).AttrOr("href", "") != "/admin/tools/overwrite_note" || text("approval-level") != "dangerous" ||
		!strings.Contains(text("approval-why"), "level is dangerous") || !strings.Contains(text("approval-description"), "Count the words") {
		t.Errorf("the tool: %q %q %q", text("approval-level"), text("approval-why"), text("approval-description"))
	}
	if card.Find(`a[data-testid="approval-session"]`).AttrOr("href", "") != "/admin/calls?session=console" ||
		text("approval-task") != "The agent's task: save the meeting notes to a file" {
		t.Errorf("session and task: %q", text("approval-task"))
	}
	if got := text("approval-findings"); got != "path: the file note.txt in the session's work directory" {
		t.Errorf("findings %q", got)
	}
	if got := text("approval-recent"); !strings.Contains(got, "denied by test-reviewer") || !strings.Contains(got, "drafts stay local") {
		t.Errorf("recent decisions %q", got)
	}
	shellCard := p.TestID("approval-" + shell)
	if got := strings.Join(strings.Fields(shellCard.Find(`[data-testid="approval-findings"]`).Text()), " "); got != `command: runs rm with 2 arguments: "-rf" "old notes"` {
		t.Errorf("the shell command's findings %q", got)
	}
	if shellCard.Find(`[data-testid="approval-task"]`).Length() != 0 || shellCard.Find(`[data-testid="approval-recent"]`).Length() != 0 {
		t.Errorf("a session without a selection, a tool without decisions: %q", shellCard.Text())
	}
}
