// Package static embeds the console's CSS, scripts and images, and serves
// them: under fingerprinted names (app.3f9a0c1e27.css), cached for a year
// by browsers since a changed file gets a new name, and gzip-compressed
// for the clients that accept it. htmx is vendored (htmx-<version>.min.js,
// BSD Zero Clause licence in htmx-LICENSE.txt): the console loads nothing
// from elsewhere.
package static

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

// FS holds the static files, served under /static.
//
//go:embed *.css *.js *.txt *.svg
var FS embed.FS

// Prefix is where the files are served.
const Prefix = "/static/"

// asset is one file as served.
type asset struct {
	name, ctype, etag string
	raw, gz           []byte // gz is nil when compressing saves nothing
	hashed            bool   // served under its fingerprinted name
}

// assets are the files by the names they are served under: each by its
// own name (revalidated on every use) and its fingerprinted one.
var assets, fingerprinted = load()

func load() (map[string]*asset, map[string]string) {
	byName, names := map[string]*asset{}, map[string]string{}
	entries, err := fs.ReadDir(FS, ".")
	if err != nil {
		panic(err) // embedded: cannot fail
	}
	for _, e := range entries {
		raw, err := FS.ReadFile(e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(raw)
		a := asset{name: e.Name(), raw: raw, etag: `"` + hex.EncodeToString(sum[:8]) + `"`,
			ctype: cmpOr(mime.TypeByExtension(path.Ext(e.Name())), "application/octet-stream")}
		if compressible(a.ctype) {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			_, _ = zw.Write(raw)
			_ = zw.Close()
			if buf.Len() < len(raw) {
				a.gz = buf.Bytes()
			}
		}
		ext := path.Ext(e.Name())
		hashedName := strings.TrimSuffix(e.Name(), ext) + "." + hex.EncodeToString(sum[:5]) + ext
		plain, hashed := a, a
		hashed.hashed = true
		byName[e.Name()], byName[hashedName] = &plain, &hashed
		names[e.Name()] = Prefix + hashedName
	}
	return byName, names
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func compressible(ctype string) bool {
	return strings.HasPrefix(ctype, "text/") || strings.Contains(ctype, "javascript") || strings.Contains(ctype, "svg")
}

// Path is the URL path of the static file name under its fingerprinted
// name, for pages to link. An unknown name is a programming error.
func Path(name string) string {
	p, ok := fingerprinted[name]
	if !ok {
		panic(fmt.Sprintf("static: no file %q", name))
	}
	return p
}

// Serve answers a GET or HEAD of a static file by its served name (the
// path after Prefix): a fingerprinted name for a year (immutable), a
// plain one revalidated by its ETag on every use; gzip-compressed when the
// client accepts it. false when no file has that name.
func Serve(w http.ResponseWriter, r *http.Request, name string) bool {
	a, ok := assets[name]
	if !ok {
		return false
	}
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("ETag", a.etag)
	h.Add("Vary", "Accept-Encoding")
	if a.hashed {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	body := a.raw
	if a.gz != nil && acceptsGzip(r.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		body = a.gz
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	return true
}

// acceptsGzip reads an Accept-Encoding header: gzip listed with a
// quality above 0 (RFC 9110: "gzip;q=0" refuses it).
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		name, value, _ := strings.Cut(strings.TrimSpace(params), "=")
		if !strings.EqualFold(strings.TrimSpace(name), "q") {
			return true
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		return err == nil && q > 0
	}
	return false
}

// HTMX is the path of the vendored htmx script.
var HTMX = Path("htmx-2.0.11.min.js")

// ConsoleJS is the path of the console's own script (copy buttons, the
// approvals queue's polling guard): every page's behaviour is in a file,
// as the Content-Security-Policy requires.
var ConsoleJS = Path("console.js")

// Favicon is the path of the console's icon.
var Favicon = Path("favicon.svg")

// HTMXConfig is htmx's configuration (its htmx-config meta tag) under that
// policy: no <style> element for indicators (their rules are in app.css),
// and no eval of attribute expressions.
const HTMXConfig = `{"includeIndicatorStyles":false,"allowEval":false}`
