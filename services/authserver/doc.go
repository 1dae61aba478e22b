// Package authserver is Toolbelt's own OAuth 2.1 authorization server (the
// default, TOOLBELT_OAUTH=embedded): people sign in to the console, allow
// an MCP or API client on a consent page, and the client gets short opaque
// access tokens (and rotating refresh tokens) for /mcp and /api/v1.
//
// The protocol is zitadel/oidc's op package; this package is its storage
// (models' oauth tables), the rules op leaves to it (PKCE S256 required,
// the RFC 8707 resource becoming the audience, one-time codes, refresh
// token rotation with reuse detection, scopes bounded by the role), the
// consent service the console page calls, and Tokens, the verifier the web
// layer asks for every bearer token that is not an API key.
package authserver
