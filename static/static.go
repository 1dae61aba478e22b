// Package static embeds the console's CSS, scripts and images. htmx is
// vendored (htmx-<version>.min.js, BSD Zero Clause licence in
// htmx-LICENSE.txt): the console loads nothing from elsewhere.
package static

import "embed"

// FS holds the static files, served under /static.
//
//go:embed *.css *.js *.txt
var FS embed.FS

// HTMX is the path of the vendored htmx script.
const HTMX = "/static/htmx-2.0.11.min.js"
