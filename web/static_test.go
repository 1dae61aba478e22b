package web_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"toolbelt/static"
)

// TestStaticAssets: the pages link their stylesheets, scripts and icon
// under fingerprinted names, served for a year as immutable and gzipped
// for a client that accepts it (byte for byte the file once unzipped); a
// plain name is revalidated by its ETag (304); a made-up fingerprint, a
// climb out of the directory or an encoded one is 404; /favicon.ico is
// the console's icon.
func TestStaticAssets(t *testing.T) {
	app := newTestApp(t)
	get := func(path string, header ...string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		app.handler.ServeHTTP(rec, req)
		return rec
	}
	var linked []string
	signedIn(t, app, "admin").get("/admin").Doc.Find(`link[href^="/static/"], script[src^="/static/"]`).Each(func(_ int, s *goquery.Selection) {
		linked = append(linked, s.AttrOr("href", s.AttrOr("src", "")))
	})
	if len(linked) < 7 {
		t.Fatalf("the dashboard links %d static files: %v", len(linked), linked)
	}
	raw, err := static.FS.ReadFile("app.css")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range linked {
		if !regexp.MustCompile(`\.[0-9a-f]{10}\.[a-z]+$`).MatchString(path) {
			t.Errorf("%s is linked without a fingerprint", path)
		}
		rec := get(path, "Accept-Encoding", "br, gzip;q=0.8")
		if rec.Code != 200 || rec.Header().Get("Cache-Control") != "public, max-age=31536000, immutable" || rec.Header().Get("Vary") != "Accept-Encoding" {
			t.Errorf("%s: %d %v", path, rec.Code, rec.Header())
		}
		if path == static.Path("app.css") {
			if rec.Header().Get("Content-Encoding") != "gzip" || rec.Body.Len() >= len(raw) {
				t.Errorf("app.css: %q, %d bytes for %d", rec.Header().Get("Content-Encoding"), rec.Body.Len(), len(raw))
			}
			zr, err := gzip.NewReader(rec.Body)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := io.ReadAll(zr); !bytes.Equal(got, raw) {
				t.Error("app.css unzipped is not the file")
			}
		}
	}
	if rec := get(static.Path("app.css"), "Accept-Encoding", "gzip;q=0"); rec.Header().Get("Content-Encoding") != "" || !bytes.Equal(rec.Body.Bytes(), raw) {
		t.Errorf("gzip refused with q=0, still sent: %q", rec.Header().Get("Content-Encoding"))
	}

	plain := get("/static/app.css")
	if plain.Code != 200 || plain.Header().Get("Cache-Control") != "no-cache" || plain.Header().Get("ETag") == "" {
		t.Fatalf("a plain name: %d %v", plain.Code, plain.Header())
	}
	if rec := get("/static/app.css", "If-None-Match", plain.Header().Get("ETag")); rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Errorf("revalidated: %d, %d bytes", rec.Code, rec.Body.Len())
	}
	for _, path := range []string{"/static/app.0123456789.css", "/static/../static.go", "/static/%2e%2e/static.go", "/static/static.go", "/static/"} {
		if rec := get(path); rec.Code != 404 {
			t.Errorf("%s: %d", path, rec.Code)
		}
	}
	if rec := get("/favicon.ico"); rec.Code != 200 || rec.Header().Get("Content-Type") != "image/svg+xml" {
		t.Errorf("/favicon.ico: %d %v", rec.Code, rec.Header())
	}
}
