package console

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"toolbelt/handlers"
	"toolbelt/services/runners"
	"toolbelt/views"
)

const connectionsPage = runners.ConnectionsPage

// ConnectionsPage shows the signed-in person's account at each upstream
// that acts as each person: connected or not, as whom, with what scopes,
// since when, and why it stopped working; ?connect=<server> (the URL a
// not-connected call names) marks that server's row.
func (h *Handler) ConnectionsPage(c *gin.Context) error {
	if err := handlers.OnlyQuery(c, "connect"); err != nil {
		return err
	}
	return h.renderConnections(c, http.StatusOK, "")
}

func (h *Handler) renderConnections(c *gin.Context, status int, alert string) error {
	conns, err := h.Connect.Connections(c.Request.Context(), CurrentConsole(c).Principal)
	if err != nil {
		return err
	}
	asked := c.Query("connect")
	d := views.ConnectionsData{Alert: alert}
	found := asked == ""
	for _, cn := range conns {
		d.Rows = append(d.Rows, views.ConnectionRow{Server: cn.Server, Connected: cn.Connected, Account: cn.Account, Scopes: cn.Scopes,
			Since: cn.Since, Error: cn.Error, Asked: cn.Server == asked})
		found = found || cn.Server == asked
	}
	if !found {
		d.Unknown = asked
	}
	return h.Render(c, status, views.Connections(h.Page(c, "Connections"), d))
}

// connectBind is what ties a connect flow to the console session that
// started it (connect.Start stores its hash): a value derived from the
// session's secret token, so only the browser holding that session can
// finish the flow, and the token itself goes nowhere.
func connectBind(c *gin.Context) string {
	sum := sha256.Sum256([]byte("toolbelt connect bind\x00" + CurrentConsole(c).Token))
	return hex.EncodeToString(sum[:])
}

// StartConnection starts the person's connect flow for the server and
// sends the browser to its authorization server.
func (h *Handler) StartConnection(c *gin.Context) error {
	next, err := h.Connect.Start(c.Request.Context(), CurrentConsole(c).Principal, c.Param("server"), connectBind(c))
	if err != nil {
		return h.connectionFailed(c, err, "Connecting "+c.Param("server")+" failed: %s.")
	}
	c.Redirect(http.StatusSeeOther, next)
	return nil
}

// ConnectionsReturn answers the OAuth redirect URI, outside the signed-in
// console: the authorization server's cross-site redirect does not carry
// the console's SameSite=Strict cookie, so this page continues, from
// this origin, to FinishConnection, which does.
func (h *Handler) ConnectionsReturn(c *gin.Context) {
	next := connectionsPage + "/finish?" + c.Request.URL.RawQuery
	c.Header("Referrer-Policy", "no-referrer")
	_ = h.Render(c, http.StatusOK, views.ConnectionsReturn(next))
}

// FinishConnection ends the flow the authorization server answered:
// the person denied it there, or the code is exchanged for their tokens
// (connect.Finish checks the state is theirs, this session's, unexpired
// and unused). Either way the browser goes back to the Connections page
// with what happened.
func (h *Handler) FinishConnection(c *gin.Context) error {
	q := c.Request.URL.Query()
	if e := q.Get("error"); e != "" {
		msg := "The authorization server did not connect your account: " + e
		if e == "access_denied" {
			msg = "You (or the authorization server) denied the connection: nothing was connected."
		}
		if d := q.Get("error_description"); d != "" && len(d) < 300 {
			msg += " (" + d + ")"
		}
		return h.renderConnections(c, http.StatusOK, msg)
	}
	cred, err := h.Connect.Finish(c.Request.Context(), CurrentConsole(c).Principal, connectBind(c), q.Get("state"), q.Get("code"), q.Get("iss"))
	if err != nil {
		return h.connectionFailed(c, err, "Your account was not connected: %s.")
	}
	as := ""
	if cred.Account != "" {
		as = " as " + cred.Account
	}
	return Redirect(c, connectionsPage+"?connect="+url.QueryEscape(cred.Name), fmt.Sprintf("Connected your account at %s%s.", cred.Name, as))
}

// connectionFailed shows the Connections page with why a flow failed
// (format's %s), at the error's status; an internal error goes to the
// error page, its detail to the log only.
func (h *Handler) connectionFailed(c *gin.Context, err error, format string) error {
	status := handlers.ErrorStatus(err)
	if status >= http.StatusInternalServerError {
		return err
	}
	return h.renderConnections(c, status, fmt.Sprintf(format, err.Error()))
}

// DisconnectForm deletes the person's connection to the server (revoked
// upstream) and closes the connections made with it here at once.
func (h *Handler) DisconnectForm(c *gin.Context) error {
	p, server := CurrentConsole(c).Principal, c.Param("server")
	if err := h.Connect.Disconnect(c.Request.Context(), p, server); err != nil {
		return err
	}
	h.Upstreams.DropPerson(server, p.ID)
	return Redirect(c, connectionsPage, "Disconnected your account at "+server+": calls of its tools acting for you stop now.")
}
