// Package swaggerui embeds the Swagger UI page served under /swagger: the
// files of swagger-ui-dist 4.15.5 the page loads (the bundle, the standalone
// preset, the stylesheet, the icons and the OAuth 2 redirect page; Apache
// License 2.0, in LICENSE and NOTICE) and the page itself as gin-swagger
// 1.6.1 rendered it for its default configuration (index.html, index.css,
// swagger-initializer.js, which loads doc.json; index.css ends with our
// rules for contrast and target size). They are the bytes
// swaggo/files v1.0.1 served; its source maps and the unused ES and
// unbundled builds (6.7 MB) are left out. The bundle, the preset and the
// stylesheet are stored gzip-compressed (1.5 MB as 0.4 MB): web serves
// them so to browsers, which all accept gzip.
package swaggerui

import "embed"

// FS holds the files, by base name.
//
//go:embed *.html *.css *.js *.png *.gz
var FS embed.FS
