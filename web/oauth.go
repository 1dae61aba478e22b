package web

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"toolbelt/services/authserver"
)

// oauthRoutes are the embedded authorization server's endpoints, all
// served by its op handler; anyone may call them (the protocol
// authenticates: PKCE, codes, refresh tokens).
var oauthRoutes = []struct{ method, path string }{
	{http.MethodGet, authserver.AuthorizePath},
	{http.MethodPost, authserver.AuthorizePath},
	{http.MethodGet, authserver.CallbackPath},
	{http.MethodPost, authserver.TokenPath},
	{http.MethodOptions, authserver.TokenPath},
	{http.MethodPost, authserver.RevokePath},
	{http.MethodOptions, authserver.RevokePath},
	{http.MethodGet, authserver.KeysPath},
	{http.MethodPost, authserver.IntrospectPath},
}

// mountOAuth serves the embedded authorization server: its endpoints
// under /oauth and its metadata (RFC 8414, and the OpenID Connect form
// clients also try) for the clients that discover it from /mcp's 401.
func mountOAuth(r *gin.Engine, d Deps) {
	op := gin.WrapH(d.AuthServer.Handler())
	for _, rt := range oauthRoutes {
		r.Handle(rt.method, rt.path, op)
	}
	metadata := func(c *gin.Context) {
		// Read by browser-based clients on other origins.
		c.Header("Access-Control-Allow-Origin", "*")
		c.Header("Cache-Control", "public, max-age=300")
		c.JSON(http.StatusOK, d.AuthServer.Metadata(c.Request.Context()))
	}
	for _, p := range []string{authserver.MetadataPath, authserver.OIDCConfigPath} {
		r.GET(p, metadata)
		r.OPTIONS(p, func(c *gin.Context) {
			c.Header("Access-Control-Allow-Origin", "*")
			c.Header("Access-Control-Allow-Methods", "GET, OPTIONS")
			c.Status(http.StatusNoContent)
		})
	}
}
