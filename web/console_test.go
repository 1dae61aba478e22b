package web_test

import (
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
)

// browserClient is a console user driving the real router over HTTP with a
// cookie jar, as a browser without JavaScript would. It keeps the CSRF
// token of the last page it read, and forms carry it.
type browserClient struct {
	t    testing.TB
	srv  *httptest.Server
	http *http.Client
	csrf string
}

// page is one fetched page.
type page struct {
	Status int
	URL    string // after redirects
	Doc    *goquery.Document
	Header http.Header
}

// TestID finds the elements with a data-testid.
func (p page) TestID(id string) *goquery.Selection {
	return p.Doc.Find(`[data-testid="` + id + `"]`)
}

func newBrowserClient(t testing.TB, app *testApp) *browserClient {
	t.Helper()
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	return &browserClient{t: t, srv: srv, http: &http.Client{Jar: jar}}
}

// signedIn returns a client signed in with the key of role.
func signedIn(t testing.TB, app *testApp, role string) *browserClient {
	t.Helper()
	b := newBrowserClient(t, app)
	b.get("/admin/login")
	// A reviewer lands on the approvals queue, the others on the dashboard.
	reviewer := app.do(t, role, "GET", "/api/v1/me", nil).JSON(t)["role"] == "reviewer"
	home := map[bool]string{true: "/admin/approvals", false: "/admin"}[reviewer]
	if p := b.post("/admin/login", url.Values{"key": {app.keys[role]}}); p.Status != 200 || !strings.HasSuffix(p.URL, home) {
		t.Fatalf("sign in as %s: %d at %s, want %s", role, p.Status, p.URL, home)
	}
	return b
}

func (b *browserClient) read(resp *http.Response, err error) page {
	b.t.Helper()
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	doc, err := goquery.NewDocumentFromReader(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	if tok, ok := doc.Find(`input[name="_csrf"]`).First().Attr("value"); ok {
		b.csrf = tok
	}
	return page{Status: resp.StatusCode, URL: resp.Request.URL.String(), Doc: doc, Header: resp.Header}
}

// get fetches a console path (redirects followed).
func (b *browserClient) get(path string) page {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.srv.URL+path, nil)
	req.Header.Set("Accept", "text/html")
	return b.read(b.http.Do(req))
}

// post submits a form with the current CSRF token (unless the form sets
// _csrf itself).
func (b *browserClient) post(path string, form url.Values) page {
	b.t.Helper()
	if _, ok := form["_csrf"]; !ok {
		form.Set("_csrf", b.csrf)
	}
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "text/html")
	return b.read(b.http.Do(req))
}

// postRaw submits a form without following the redirect, for tests that
// read the answer on the wire, and returns it with the cookie it sets
// under name (nil when none).
func (b *browserClient) postRaw(path string, form url.Values, name string) (*http.Response, *http.Cookie) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range b.http.Jar.Cookies(req.URL) {
		req.AddCookie(c)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return resp, c
		}
	}
	return resp, nil
}

func TestConsoleSignIn(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)

	// Without a session a page sends the browser to sign in, and back after.
	b := newBrowserClient(t, app)
	p := b.get("/admin?tab=1")
	if p.Status != 200 || !strings.Contains(p.URL, "/admin/login?next=%2Fadmin%3Ftab%3D1") || p.TestID("sign-in-form").Length() != 1 {
		t.Fatalf("unsigned page: %d %s", p.Status, p.URL)
	}

	// A wrong key: the error sits next to the field.
	p = b.post("/admin/login", url.Values{"key": {"tb_wrongwrongwrongwrong"}, "next": {"/admin"}})
	if p.Status != 401 || !strings.Contains(p.TestID("error-key").Text(), "not valid") {
		t.Fatalf("wrong key: %d %q", p.Status, p.TestID("error-key").Text())
	}
	if v, _ := p.Doc.Find("#key").Attr("aria-invalid"); v != "true" {
		t.Error("the key field is not marked invalid")
	}
	// A form without the sign-in token is refused (login CSRF).
	if p = b.post("/admin/login", url.Values{"key": {app.keys["admin"]}, "_csrf": {"forged"}}); p.Status != 403 {
		t.Fatalf("forged sign-in form: %d", p.Status)
	}

	// The right key: an HttpOnly, SameSite=Strict session cookie.
	b.get("/admin/login")
	resp, session := b.postRaw("/admin/login", url.Values{"key": {app.keys["admin"]}, "_csrf": {b.csrf}}, "tb_session")
	if resp.StatusCode != http.StatusSeeOther || session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/admin" {
		t.Fatalf("sign in: %d cookie %+v", resp.StatusCode, session)
	}
	b.http.Jar.SetCookies(resp.Request.URL, []*http.Cookie{session})
	p = b.get("/admin")
	if p.Status != 200 || p.TestID("user").Text() != "admin" || p.TestID("role").Text() != "admin" {
		t.Fatalf("dashboard: %d user %q", p.Status, p.TestID("user").Text())
	}
	if p.TestID("nav-Dashboard").Length() != 1 {
		t.Error("the dashboard is not in the navigation")
	}
	if strings.Contains(p.Doc.Text(), app.keys["admin"]) {
		t.Fatal("a page shows the API key")
	}

	// A change without the CSRF token is a 403 page; with it, sign out works.
	if p = b.post("/admin/logout", url.Values{"_csrf": {"nope"}}); p.Status != 403 || p.TestID("error-page").Length() != 1 {
		t.Fatalf("sign out without token: %d", p.Status)
	}
	if p = b.post("/admin/logout", url.Values{}); p.Status != 200 || p.TestID("sign-in-form").Length() != 1 {
		t.Fatalf("sign out: %d %s", p.Status, p.URL)
	}
	// An htmx request without a session is told to load the sign-in page.
	hx, _ := http.NewRequest(http.MethodGet, b.srv.URL+"/admin/approvals/pending", nil)
	hx.Header.Set("HX-Request", "true")
	if resp, err := http.DefaultClient.Do(hx); err != nil || resp.StatusCode != 401 || resp.Header.Get("HX-Redirect") != "/admin/login" {
		t.Fatalf("htmx without a session: %v %v", err, resp)
	}
	// The old cookie no longer opens anything.
	b.http.Jar.SetCookies(resp.Request.URL, []*http.Cookie{session})
	if p = b.get("/admin"); p.TestID("sign-in-form").Length() != 1 {
		t.Fatalf("after sign out the old session still works: %s", p.URL)
	}
}

// A revoked key ends the console sessions opened with it.
func TestConsoleSessionEndsWithKey(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	created := app.do(t, "admin", "POST", "/api/v1/principals", map[string]any{"name": "rev", "role": "reviewer"})
	if created.Status != 201 {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	body := created.JSON(t)
	app.keys["rev"] = body["key"].(string)
	b := signedIn(t, app, "rev")
	if p := b.get("/admin"); p.Status != 200 || p.TestID("role").Text() != "reviewer" {
		t.Fatalf("reviewer dashboard: %d", p.Status)
	}
	if r := app.do(t, "admin", "DELETE", fmt.Sprintf("/api/v1/keys/%v", body["key_id"]), nil); r.Status != 204 {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	if p := b.get("/admin"); p.TestID("sign-in-form").Length() != 1 {
		t.Fatal("a revoked key's session still opens the console")
	}
}

// Errors are pages for browsers and JSON for API clients.
func TestErrorsAsPagesOrJSON(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	b := signedIn(t, app, "admin")
	p := b.get("/admin/no-such-page")
	if p.Status != 404 || p.TestID("error-page").Length() != 1 || p.TestID("nav").Length() != 1 {
		t.Fatalf("console 404: %d", p.Status)
	}
	r := app.do(t, "admin", "GET", "/api/v1/no-such", nil)
	if r.Status != 404 || r.JSON(t)["error"] == nil {
		t.Fatalf("API 404: %d %s", r.Status, r.Body)
	}
}
