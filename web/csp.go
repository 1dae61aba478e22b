package web

// ConsoleCSP is the Content-Security-Policy of the console and of every
// other page the server renders: scripts, styles, fonts and fetches only
// from this origin (static/, embedded), images also as data: URLs, no
// inline script, style or event handler, no eval, no plugins, no <base>,
// forms only back to this origin, and no framing. An injected tag that
// escaped templ's escaping could therefore neither run nor restyle the
// page, nor send a form elsewhere.
const ConsoleCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

// SwaggerPrefix is where Swagger UI is served.
const SwaggerPrefix = "/swagger"

// OpenAPI3Path serves the API document in OpenAPI 3.0.
const OpenAPI3Path = "/openapi.json"
