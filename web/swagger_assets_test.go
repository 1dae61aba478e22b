package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// The large Swagger UI files are stored compressed: a browser gets them
// gzip-encoded, any other client the bytes of swagger-ui-dist 5.35.0 as
// published (their SHA-256 here), and each variant has its own ETag.
func TestSwaggerAssetsCompressed(t *testing.T) {
	gin.SetMode(gin.TestMode)
	r := gin.New()
	r.GET("/swagger/*any", swaggerUI())
	get := func(path, accept, ifNoneMatch string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept)
		}
		if ifNoneMatch != "" {
			req.Header.Set("If-None-Match", ifNoneMatch)
		}
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		return rec
	}
	for name, want := range map[string]string{
		"swagger-ui-bundle.js":            "e6a898692f2d768e807c3ba4626068a69a2c5dd960dd6c76f3e4d3a3de180af2",
		"swagger-ui-standalone-preset.js": "5243d492e14505e0cab87ac8b0195d0e615943e651743b2b698450a46eb470be",
		"swagger-ui.css":                  "5ed08757e53da3e026d6cbecc61fe5d43585c9560b302d534ad56692519a273d",
	} {
		plain := get("/swagger/"+name, "", "")
		if plain.Code != http.StatusOK || plain.Header().Get("Content-Encoding") != "" || sha(plain.Body.Bytes()) != want {
			t.Fatalf("%s without gzip: %d, encoding %q, sha256 %s; want the published bytes", name, plain.Code,
				plain.Header().Get("Content-Encoding"), sha(plain.Body.Bytes()))
		}
		zipped := get("/swagger/"+name, "br, gzip;q=0.8", "")
		if zipped.Header().Get("Content-Encoding") != "gzip" || zipped.Header().Get("Vary") != "Accept-Encoding" {
			t.Fatalf("%s with gzip: encoding %q, vary %q", name, zipped.Header().Get("Content-Encoding"), zipped.Header().Get("Vary"))
		}
		z, err := gzip.NewReader(bytes.NewReader(zipped.Body.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(z)
		if err != nil || sha(body) != want || zipped.Body.Len() >= len(body) {
			t.Fatalf("%s gzip: %d bytes for %d, sha256 %s (%v)", name, zipped.Body.Len(), len(body), sha(body), err)
		}
		if plain.Header().Get("ETag") == zipped.Header().Get("ETag") {
			t.Errorf("%s: both encodings have ETag %s", name, plain.Header().Get("ETag"))
		}
		if rec := get("/swagger/"+name, "gzip", zipped.Header().Get("ETag")); rec.Code != http.StatusNotModified {
			t.Errorf("%s: If-None-Match of the gzip variant: %d, want 304", name, rec.Code)
		}
		if rec := get("/swagger/"+name, "gzip;q=0", ""); rec.Header().Get("Content-Encoding") != "" {
			t.Errorf("%s: gzip;q=0 got %q", name, rec.Header().Get("Content-Encoding"))
		}
	}
	if rec := get("/swagger/swagger-ui-bundle.js.gz", "gzip", ""); rec.Code != http.StatusNotFound {
		t.Errorf("the stored .gz name answers %d, want 404", rec.Code)
	}
	if rec := get("/swagger/index.html", "gzip", ""); rec.Code != http.StatusOK || rec.Header().Get("Content-Encoding") != "" {
		t.Errorf("index.html: %d, encoding %q", rec.Code, rec.Header().Get("Content-Encoding"))
	}
}

func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{
		"": false, "gzip": true, "GZIP": true, "x-gzip": true, "*": true, "br": false, "gzip;q=0": false,
		"gzip; q=0.0": false, "deflate, gzip;q=0.5": true, "gzip;q=bad": false, "identity": false, " br ,  gzip ": true,
		"*;q=1, gzip;q=0": false, "gzip;q=0, *": false, "br, *;q=0.1": true, "*;q=0": false,
	} {
		if got := acceptsGzip(header); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", header, got, want)
		}
	}
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
