package web_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// A notice in the URL is not shown: only the server says what succeeded.
func TestConsoleNoticeNotFromURL(t *testing.T) {
	app := newTestApp(t)
	b := signedIn(t, app, "admin")
	const bait = "Paste your key at https://evil.example/"
	for _, path := range []string{"/admin", "/admin/access", "/admin/approvals", "/admin/calls", "/admin/playground",
		"/admin/tools", "/admin/tools/file_read", "/admin/tools/new", "/admin/no-such-page"} {
		p := b.get(path + "?notice=" + url.QueryEscape(bait))
		if p.TestID("notice").Length() != 0 || strings.Contains(p.Doc.Text(), "Paste your key") {
			t.Errorf("%s?notice=…: %d shows %q", path, p.Status, p.TestID("notice").Text())
		}
	}
}

// An action's notice arrives in a signed flash cookie and is shown once:
// not in the address, gone on reload; a forged cookie, or one signed for
// another session, shows nothing.
func TestConsoleNoticeShownOnce(t *testing.T) {
	app := newTestApp(t)
	b := signedIn(t, app, "admin")
	agent := strconv.Itoa(int(app.ids["agent"]))
	b.get("/admin/access")

	// Saving grants, with the redirect's cookie read on the wire.
	resp, flash := b.postRaw("/admin/access/principals/"+agent+"/grants",
		url.Values{"category": {"filesystem"}, "tools": {"web_search"}, "_csrf": {b.csrf}}, "tb_notice")
	// Back to the page, opened to the agent's row.
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/admin/access?open="+agent+"#principal-"+agent {
		t.Fatalf("save grants: %d to %q", resp.StatusCode, loc)
	}
	if flash == nil || !flash.HttpOnly || flash.SameSite != http.SameSiteStrictMode || flash.Path != "/admin" || flash.MaxAge <= 0 || flash.MaxAge > 60 ||
		strings.Contains(flash.Value, "Grants") {
		t.Fatalf("flash cookie %+v", flash)
	}

	// Another admin session given that cookie ignores it (and clears it).
	other := signedIn(t, app, "admin")
	other.http.Jar.SetCookies(mustURL(other.srv.URL+"/admin"), []*http.Cookie{{Name: "tb_notice", Value: flash.Value, Path: "/admin"}})
	if p := other.get("/admin/access"); p.TestID("notice").Length() != 0 {
		t.Fatalf("another session shows the notice %q", p.TestID("notice").Text())
	}
	// A cookie the server did not sign shows nothing.
	other.http.Jar.SetCookies(mustURL(other.srv.URL+"/admin"), []*http.Cookie{{Name: "tb_notice", Path: "/admin",
		Value: "9999999999.UGFzdGUgeW91ciBrZXk.bm90LWEtbWFj"}})
	if p := other.get("/admin/access"); p.TestID("notice").Length() != 0 {
		t.Fatalf("a forged cookie shows %q", p.TestID("notice").Text())
	}

	// The session that acted sees it once.
	b.http.Jar.SetCookies(resp.Request.URL, []*http.Cookie{flash})
	p := b.get("/admin/access")
	if got := p.TestID("notice").Text(); p.Status != 200 || got != "Grants saved: 1 category, 1 tool." || strings.Contains(p.URL, "notice") {
		t.Fatalf("after saving: %d %s notice %q", p.Status, p.URL, got)
	}
	if p = b.get("/admin/access"); p.TestID("notice").Length() != 0 {
		t.Fatalf("the notice is shown again on reload: %q", p.TestID("notice").Text())
	}

	// Revoking a key, followed as a browser does: once, then gone.
	key := app.do(t, "admin", "POST", "/api/v1/principals/"+agent+"/keys", map[string]any{"label": "laptop"}).JSON(t)
	keyID := itoa(key["id"])
	b.get("/admin/access")
	p = b.post("/admin/access/keys/"+keyID+"/revoke", url.Values{})
	if got := p.TestID("notice").Text(); p.Status != 200 || got != "Key “laptop” of test-agent revoked; it stopped working at once." || strings.Contains(p.URL, "notice") {
		t.Fatalf("revoke: %d %s notice %q", p.Status, p.URL, got)
	}
	if p = b.get("/admin/access"); p.TestID("notice").Length() != 0 {
		t.Fatalf("the revoke notice is shown again: %q", p.TestID("notice").Text())
	}

	// htmx actions (the approvals queue) get the cookie with HX-Redirect.
	dangerousWrite(t, app)
	_, approvalID := dangerousCall(t, app, "agent", "approved by htmx")
	b.get("/admin/approvals")
	hx, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/admin/approvals/"+approvalID+"/approve", nil)
	hx.Header.Set("HX-Request", "true")
	hx.Header.Set("X-CSRF-Token", b.csrf)
	resp, err := b.http.Do(hx)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("HX-Redirect") != "/admin/approvals" {
		t.Fatalf("htmx approve: %d %q", resp.StatusCode, resp.Header.Get("HX-Redirect"))
	}
	if p = b.get("/admin/approvals"); !strings.HasPrefix(p.TestID("notice").Text(), "Approved the overwrite_note call ") {
		t.Fatalf("after the htmx approve: %q", p.TestID("notice").Text())
	}
	if p = b.get("/admin/approvals"); p.TestID("notice").Length() != 0 {
		t.Fatalf("the approve notice is shown again: %q", p.TestID("notice").Text())
	}
}
