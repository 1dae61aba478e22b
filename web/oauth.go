package web

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"toolbelt/models"
	"toolbelt/services/authserver"
	"toolbelt/services/clientdoc"
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
}

// mountOAuth serves the embedded authorization server: its endpoints
// under /oauth and its metadata (RFC 8414, and the OpenID Connect form
// clients also try) for the clients that discover it from /mcp's 401.
func mountOAuth(r *gin.Engine, d Deps) {
	op := gin.WrapH(d.AuthServer.Handler())
	for _, rt := range oauthRoutes {
		r.Handle(rt.method, rt.path, op)
	}
	if d.AuthServer.DCR() {
		r.POST(authserver.RegisterPath, registerClient(d))
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

// registerClient is dynamic client registration (RFC 7591), when on:
// public clients only, validated as a metadata document is.
func registerClient(d Deps) gin.HandlerFunc {
	return func(c *gin.Context) {
		body, err := io.ReadAll(c.Request.Body)
		if err != nil {
			d.Handler.Fail(c, err)
			return
		}
		cl, err := d.AuthServer.RegisterClient(c.Request.Context(), c.ClientIP(), body)
		if err != nil {
			code := "invalid_client_metadata"
			if errors.Is(err, clientdoc.ErrRedirectURI) {
				code = "invalid_redirect_uri"
			}
			if !errors.Is(err, models.ErrInvalid) {
				d.Handler.Fail(c, err)
				return
			}
			c.JSON(http.StatusBadRequest, gin.H{"error": code, "error_description": err.Error()})
			return
		}
		c.Header("Cache-Control", "no-store")
		c.JSON(http.StatusCreated, gin.H{"client_id": cl.ID, "client_id_issued_at": time.Now().Unix(), "client_name": cl.Name,
			"redirect_uris": cl.RedirectURIs, "grant_types": cl.GrantTypes, "response_types": cl.ResponseTypes,
			"token_endpoint_auth_method": "none", "scope": cl.Scope})
	}
}
