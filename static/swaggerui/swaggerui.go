// Package swaggerui embeds the Swagger UI page served under /swagger: the
// files of swagger-ui-dist 5.35.0 the page loads (the bundle, the standalone
// preset, the stylesheet, the icons and the OAuth 2 redirect page and its
// script; Apache License 2.0, in LICENSE and NOTICE), its index.html and
// index.css, with our rules for contrast and target size at the end of
// index.css, and our swagger-initializer.js, which loads doc.json in the
// base layout and names the parameters' selects (TestE2ESwaggerAccessible).
// The source maps and the unused ES and unbundled builds are left out. The
// bundle, the preset and the stylesheet are stored gzip-compressed
// (gzip -9 -n; 2.2 MB as 0.56 MB): web serves them so to browsers, which
// all accept gzip.
package swaggerui

import "embed"

// FS holds the files, by base name.
//
//go:embed *.html *.css *.js *.png *.gz
var FS embed.FS
