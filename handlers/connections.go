package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"toolbelt/services/connect"
)

// MyConnections lists the caller's accounts at the upstreams that act as
// each person.
//
//	@Summary		List my connected accounts
//	@ID			listMyConnections
//	@Description	Every upstream MCP server that acts as the person a call is for (auth type oauth), with the caller's account there: connected or not, as whom, with what scopes, since when, why it stopped working, and the console page that connects it. Never a token.
//	@Tags			connections
//	@Produce		json
//	@Success		200	{array}		connect.Connection
//	@Failure		401	{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/me/connections [get]
func (h *Handler) MyConnections(c *gin.Context) error {
	conns, err := h.Connect.Connections(c.Request.Context(), CurrentPrincipal(c))
	if err != nil {
		return err
	}
	if conns == nil {
		conns = []connect.Connection{}
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, conns)
	return nil
}

// DisconnectMine deletes the caller's account at an upstream.
//
//	@Summary		Disconnect my account at an upstream
//	@ID			disconnectMyConnection
//	@Description	Deletes the caller's connected account at the server and revokes its tokens there. Calls acting for the caller stop at once (UPSTREAM_NOT_CONNECTED) until they connect again in the console.
//	@Tags			connections
//	@Param			name	path	string	true	"Upstream server name"
//	@Success		204
//	@Failure		401	{object}	ErrorBody
//	@Failure		404	{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/me/connections/{name} [delete]
func (h *Handler) DisconnectMine(c *gin.Context) error {
	p, server := CurrentPrincipal(c), c.Param("name")
	if err := h.Connect.Disconnect(c.Request.Context(), p, server); err != nil {
		return err
	}
	h.Upstreams.DropPerson(server, p.ID)
	c.Status(http.StatusNoContent)
	return nil
}
