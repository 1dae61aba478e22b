package web

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"toolbelt/services/connect"
)

// mountUpstreamClient serves Toolbelt's client ID metadata document: its
// URL is Toolbelt's client id at the authorization servers of OAuth
// upstreams that take such documents (no registration needed), and it
// names the console's callback as the one redirect URI. Public: the
// authorization servers fetch it.
func mountUpstreamClient(r *gin.Engine, d Deps) {
	doc := d.Connect.ClientDocument()
	r.GET(connect.ClientDocumentPath, func(c *gin.Context) {
		c.Header("Cache-Control", "public, max-age=300")
		c.Data(http.StatusOK, "application/json", doc)
	})
}
