package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"toolbelt/web"
)

// Every console route (the page table, sign-in and sign-out, an unknown
// console path, signed in and out, and refused requests) answers with the
// console's Content-Security-Policy and the other security headers; the
// home page shares the policy, and Swagger UI has its own. No page has
// inline code the policy would refuse.
func TestConsoleCSPHeaderOnEveryPage(t *testing.T) {
	app := newTestApp(t)
	b := signedIn(t, app, "admin")
	var session *http.Cookie
	for _, c := range b.http.Jar.Cookies(mustURL(b.srv.URL + "/admin")) {
		if c.Name == "tb_session" {
			session = c
		}
	}
	if session == nil {
		t.Fatal("no session cookie")
	}
	params := strings.NewReplacer(":name", "file_read", ":id", "1")
	type probe struct{ method, path string }
	probes := []probe{
		{http.MethodGet, web.ConsolePrefix + "/login"},
		{http.MethodPost, web.ConsolePrefix + "/login"},
		{http.MethodPost, web.ConsolePrefix + "/logout"}, // no CSRF token: refused
		{http.MethodGet, web.ConsolePrefix + "/no-such-page"},
	}
	for _, p := range web.Pages {
		// POSTs go without the CSRF token: the refusal must carry the
		// headers too, and nothing changes.
		probes = append(probes, probe{p.Method, web.ConsolePrefix + params.Replace(p.Path)})
	}
	want := map[string]string{
		"Content-Security-Policy": web.ConsoleCSP,
		"X-Frame-Options":         "DENY",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
	}
	for _, signed := range []bool{true, false} {
		for _, pr := range probes {
			req := httptest.NewRequest(pr.method, pr.path, nil)
			req.Header.Set("Accept", "text/html")
			if signed {
				req.AddCookie(session)
			}
			rec := httptest.NewRecorder()
			app.handler.ServeHTTP(rec, req)
			for name, value := range want {
				if got := rec.Header().Values(name); len(got) != 1 || got[0] != value {
					t.Errorf("%s %s (signed in %v, %d): %s = %q, want %q", pr.method, pr.path, signed, rec.Code, name, got, value)
				}
			}
			if inline := inlineCode(t, rec.Body.String()); len(inline) != 0 {
				t.Errorf("%s %s (signed in %v, %d): inline code the policy refuses: %v", pr.method, pr.path, signed, rec.Code, inline)
			}
		}
	}

	for path, policy := range map[string]string{"/": web.ConsoleCSP, "/swagger/index.html": web.ConsoleCSP, "/static/console.js": web.ConsoleCSP} {
		rec := httptest.NewRecorder()
		app.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != 200 || rec.Header().Get("Content-Security-Policy") != policy {
			t.Errorf("%s: %d CSP %q, want %q", path, rec.Code, rec.Header().Get("Content-Security-Policy"), policy)
		}
	}
}

// inlineCode lists what in a page the console's policy would refuse:
// script elements without src, style elements, style attributes and event
// handler attributes (the browser test sees the pages it opens; this sees
// every page of the table, in the state the probe finds it).
func inlineCode(t *testing.T, html string) []string {
	t.Helper()
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(html))
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	doc.Find("script:not([src]), style").Each(func(_ int, s *goquery.Selection) {
		found = append(found, "<"+goquery.NodeName(s)+">")
	})
	doc.Find("*").Each(func(_ int, s *goquery.Selection) {
		for _, a := range s.Nodes[0].Attr {
			if a.Key == "style" || strings.HasPrefix(a.Key, "on") || strings.HasPrefix(strings.TrimSpace(a.Val), "javascript:") {
				found = append(found, goquery.NodeName(s)+"["+a.Key+"]")
			}
		}
	})
	return found
}

// The Swagger UI page has no inline script or style, which its policy
// refuses, so an update of static/swaggerui that brings one fails here.
func TestSwaggerPageHasNoInlineCode(t *testing.T) {
	app := newTestApp(t)
	rec := httptest.NewRecorder()
	app.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/swagger/index.html", nil))
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	if inline := inlineCode(t, rec.Body.String()); len(inline) != 0 {
		t.Errorf("the Swagger UI page has inline code its policy refuses: %v", inline)
	}
}
