// Package static embeds the console's CSS, scripts and images.
package static

import "embed"

// FS holds the static files, served under /static.
//
//go:embed *.css
var FS embed.FS
