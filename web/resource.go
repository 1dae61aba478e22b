package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"toolbelt/models"
	"toolbelt/services/access"
)

// ResourceMetadataPath is where Toolbelt describes itself as an OAuth
// protected resource (RFC 9728): at the root for the whole server, and
// suffixed with /mcp or /api/v1 for each resource, as MCP clients look
// first.
const ResourceMetadataPath = "/.well-known/oauth-protected-resource"

// mountResourceMetadata serves the protected-resource metadata of the
// whole server and of each resource, naming the authorization servers
// whose tokens are accepted and the scopes that mean something here.
// Without a public URL Toolbelt knows no name for itself, and serves none.
func mountResourceMetadata(r *gin.Engine, d Deps) {
	if d.PublicURL == "" {
		return
	}
	for _, suffix := range []string{"", MCPPath, APIPrefix} {
		h := gin.WrapH(auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource:               d.PublicURL + suffix,
			AuthorizationServers:   d.AuthorizationServers,
			ScopesSupported:        access.Scopes,
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "Toolbelt",
			ResourceDocumentation:  d.PublicURL + SwaggerPrefix + "/index.html",
		}))
		r.GET(ResourceMetadataPath+suffix, h)
		r.OPTIONS(ResourceMetadataPath+suffix, h)
	}
}

// resourceOf is the resource a request to the route is for: /mcp, or the
// API (/metrics counts as the API's).
func resourceOf(d Deps, route string) string {
	if route == MCPPath {
		return d.PublicURL + MCPPath
	}
	return d.PublicURL + APIPrefix
}

// challenge writes the Bearer challenge of RFC 6750 and RFC 9728 for a
// request to route refused with code ("" for no credentials,
// invalid_token, insufficient_scope): where to find the resource's
// metadata, and the scopes to ask for, so a client that follows the MCP
// authorization spec finds its way in. API-key clients ignore it.
func challenge(c *gin.Context, d Deps, route, code string, scopes []string) {
	var b strings.Builder
	b.WriteString("Bearer")
	sep := " "
	param := func(k, v string) {
		fmt.Fprintf(&b, "%s%s=%q", sep, k, v)
		sep = ", "
	}
	if code != "" {
		param("error", code)
	}
	if len(scopes) > 0 {
		param("scope", strings.Join(scopes, " "))
	}
	if d.PublicURL != "" {
		suffix := APIPrefix
		if route == MCPPath {
			suffix = MCPPath
		}
		param("resource_metadata", d.PublicURL+ResourceMetadataPath+suffix)
	} else {
		param("realm", "toolbelt")
	}
	c.Header("WWW-Authenticate", b.String())
}

// neededScopes are the scopes a client should ask for to use route: the
// route's own, and for /mcp the calling one too (what an agent host wants).
func neededScopes(route string) []string {
	if route == MCPPath {
		return []string{access.ScopeRead, access.ScopeCall}
	}
	return nil
}

// mcpCallsTool reports whether an MCP POST calls a tool, reading the body
// (already bounded by the transport's limit) and putting it back: a token
// without tools:call may list tools but not call them, and is told so with
// a 403 the client can step up from. A batch calls one if any member does.
func mcpCallsTool(c *gin.Context) (bool, error) {
	if c.Request.Method != http.MethodPost || c.Request.Body == nil {
		return false, nil
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		return false, models.ErrInvalid.Errorf("read the request body: %v", err)
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(body))
	var one struct {
		Method string `json:"method"`
	}
	if err := json.Unmarshal(body, &one); err == nil {
		return one.Method == "tools/call", nil
	}
	var batch []struct {
		Method string `json:"method"`
	}
	if err := json.Unmarshal(body, &batch); err != nil {
		return false, nil // the transport answers the parse error
	}
	for _, m := range batch {
		if m.Method == "tools/call" {
			return true, nil
		}
	}
	return false, nil
}

// refuseScope answers 403 insufficient_scope for a token that lacks what
// route needs, naming the scope to ask for.
func refuseScope(c *gin.Context, d Deps, route, method string, g *access.Grant, need string) {
	challenge(c, d, route, "insufficient_scope", []string{need})
	d.Handler.Fail(c, models.ErrForbidden.Errorf("this token's scopes (%s) do not allow %s %s: ask for the %q scope",
		strings.Join(g.Scopes, " "), method, route, need))
}

// scopeOfRoute is the scope the route table says route needs.
func scopeOfRoute(route, method string) string {
	if route == MCPPath {
		return access.ScopeRead
	}
	if route == MetricsPath {
		return access.ScopeAdmin
	}
	for _, r := range routes {
		if APIPrefix+r.path == route && r.method == method {
			return routeScope(r)
		}
	}
	return access.ScopeAdmin
}
