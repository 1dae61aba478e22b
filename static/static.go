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

// ConsoleJS is the path of the console's own script (copy buttons, the
// approvals queue's polling guard): every page's behaviour is in a file,
// as the Content-Security-Policy requires.
const ConsoleJS = "/static/console.js"

// HTMXConfig is htmx's configuration (its htmx-config meta tag) under that
// policy: no <style> element for indicators (their rules are in app.css),
// and no eval of attribute expressions.
const HTMXConfig = `{"includeIndicatorStyles":false,"allowEval":false}`
