package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"toolbelt/static/swaggerui"
)

// swaggerAsset is one file of the Swagger UI page: its bytes, or, for a
// file stored compressed (the three large ones), gzip and its bytes
// decompressed on the first request that does not take gzip (browsers all
// do, so most servers never pay for it).
type swaggerAsset struct {
	body        func() ([]byte, error)
	gzip        []byte
	contentType string
	etag        string
}

// swaggerContentTypes are the types of the page's files, by extension, as
// gin-swagger gave them.
var swaggerContentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "application/javascript",
	".png":  "image/png",
}

// swaggerUI serves the Swagger UI page (static/swaggerui) under
// SwaggerPrefix: each file by its name, with a content hash for ETag, and
// 404 "Not Found" for any other name. A file stored gzip-compressed
// (name.gz) is sent so to a client that accepts gzip, and decompressed to
// any other. The document it loads, doc.json, is the caller's.
func swaggerUI() gin.HandlerFunc {
	assets, err := readSwaggerAssets(swaggerui.FS)
	if err != nil {
		panic("read the embedded Swagger UI: " + err.Error())
	}
	started := time.Now()
	return func(c *gin.Context) {
		a, ok := assets[c.Param("any")]
		if !ok {
			c.String(http.StatusNotFound, http.StatusText(http.StatusNotFound))
			return
		}
		etag := a.etag
		var body []byte
		if a.gzip != nil {
			c.Header("Vary", "Accept-Encoding")
		}
		if a.gzip != nil && acceptsGzip(c.GetHeader("Accept-Encoding")) {
			body, etag = a.gzip, strings.TrimSuffix(etag, `"`)+`-gzip"`
			c.Header("Content-Encoding", "gzip")
		} else {
			var err error
			if body, err = a.body(); err != nil {
				_ = c.Error(err)
				c.AbortWithStatus(http.StatusInternalServerError)
				return
			}
		}
		c.Header("Content-Type", a.contentType)
		c.Header("ETag", etag)
		http.ServeContent(c.Writer, c.Request, "", started, bytes.NewReader(body))
	}
}

// readSwaggerAssets reads every file of fsys by "/" + its name, a name.gz
// by its name without .gz.
func readSwaggerAssets(fsys fs.FS) (map[string]swaggerAsset, error) {
	assets := map[string]swaggerAsset{}
	err := fs.WalkDir(fsys, ".", func(name string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		a := swaggerAsset{body: func() ([]byte, error) { return raw, nil }}
		if base, ok := strings.CutSuffix(name, ".gz"); ok {
			name, a.gzip = base, raw
			a.body = sync.OnceValues(func() ([]byte, error) {
				z, err := gzip.NewReader(bytes.NewReader(raw))
				if err != nil {
					return nil, err
				}
				return io.ReadAll(z)
			})
		}
		// The hash of the stored bytes names the content either way.
		sum := sha256.Sum256(raw)
		a.contentType = swaggerContentTypes[path.Ext(name)]
		a.etag = `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`
		assets["/"+name] = a
		return nil
	})
	return assets, err
}

// acceptsGzip reports whether an Accept-Encoding header accepts gzip: named
// with a q above 0, or else "*" with a q above 0 (RFC 9110, 12.5.3).
func acceptsGzip(header string) bool {
	gz, star := -1.0, -1.0
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				} else {
					q = 0
				}
			}
		}
		switch strings.ToLower(strings.TrimSpace(coding)) {
		case "gzip", "x-gzip":
			gz = q
		case "*":
			star = q
		}
	}
	if gz >= 0 {
		return gz > 0
	}
	return star > 0
}
