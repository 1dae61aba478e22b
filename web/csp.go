package web

import "strings"

// ConsoleCSP is the Content-Security-Policy of the console and of every
// other page the server renders: scripts, styles, fonts and fetches only
// from this origin (static/, embedded), images also as data: URLs, no
// inline script, style or event handler, no eval, no plugins, no <base>,
// forms only back to this origin, and no framing. An injected tag that
// escaped templ's escaping could therefore neither run nor restyle the
// page, nor send a form elsewhere.
const ConsoleCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

// SwaggerCSP is the policy of /swagger, the vendored Swagger UI. It is the
// console's, but for one style attribute the UI's index page carries (the
// hidden SVG sprite, style="position:absolute;width:0;height:0"), allowed
// by its hash alone ('unsafe-hashes' lets a hash match an attribute; no
// other inline style is allowed). Its scripts are files
// (swagger-initializer.js), it calls the API with fetch on this origin, and
// its stylesheet uses data: images.
const SwaggerCSP = "default-src 'self'; script-src 'self'; " +
	"style-src 'self' 'unsafe-hashes' 'sha256-" + swaggerSpriteStyleHash + "'; " +
	"img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

// swaggerSpriteStyleHash is base64(sha256("position:absolute;width:0;height:0")),
// checked by TestSwaggerCSPHash.
const swaggerSpriteStyleHash = "ezdv1bOGcoOD7FKudKN0Y2Mb763O6qVtM8LT2mtanIU="

// SwaggerPrefix is where Swagger UI is served.
const SwaggerPrefix = "/swagger"

// OpenAPI3Path serves the API document in OpenAPI 3.0.
const OpenAPI3Path = "/openapi.json"

// cspHeader returns the Content-Security-Policy header value of a request
// path (a shared slice: securityHeaders sets it on every response without
// allocating).
func cspHeader(path string) []string {
	if path == SwaggerPrefix || strings.HasPrefix(path, SwaggerPrefix+"/") {
		return swaggerCSPHeader
	}
	return consoleCSPHeader
}

var consoleCSPHeader, swaggerCSPHeader = []string{ConsoleCSP}, []string{SwaggerCSP}
