package console

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/views"
)

// ConsentPage asks the signed-in person to allow or deny the OAuth client
// of an authorization request (the embedded authorization server sends
// the browser here).
func (h *Handler) ConsentPage(c *gin.Context) error {
	if h.OAuth == nil {
		return models.ErrNotFound.Errorf("the embedded authorization server is off")
	}
	ctx, s, id := c.Request.Context(), CurrentConsole(c), c.Query("id")
	pend, err := h.OAuth.Pending(ctx, id, s.Principal)
	if err != nil {
		return err
	}
	d := views.ConsentData{ID: pend.ID, ClientName: pend.ClientName, ClientID: pend.ClientID, RedirectHost: pend.RedirectHost,
		Resource: pend.Resource, SeenBefore: pend.SeenBefore, Scopes: pend.Scopes, Refused: pend.Refused,
		Principal: s.Principal.Name, Role: s.Principal.Role}
	if s.Principal.Role == access.RoleAgent {
		g, err := h.Accounts.Grants(ctx, s.Principal.ID)
		if err != nil {
			return err
		}
		d.Categories, d.Tools = g.Categories, g.Tools
	}
	// The form's answer goes on to the client's redirect URI: the page
	// may send it there, and nowhere else.
	if origin := h.OAuth.RedirectOrigin(ctx, id); origin != "" {
		csp := c.Writer.Header().Get("Content-Security-Policy")
		c.Header("Content-Security-Policy", strings.Replace(csp, "form-action 'self'", "form-action 'self' "+origin, 1))
	}
	return h.Render(c, http.StatusOK, views.Consent(h.Page(c, "Allow "+pend.ClientName+"?"), d))
}

// ConsentForm records the person's answer (the CSRF token was checked
// with the session's) and sends the browser on: to the code on Allow, to
// the client with error=access_denied on Deny.
func (h *Handler) ConsentForm(c *gin.Context) error {
	if h.OAuth == nil {
		return models.ErrNotFound.Errorf("the embedded authorization server is off")
	}
	ctx, s, id := c.Request.Context(), CurrentConsole(c), c.PostForm("id")
	var next string
	var err error
	switch c.PostForm("decision") {
	case "allow":
		next, err = h.OAuth.Allow(ctx, id, s.Principal)
	case "deny":
		next, err = h.OAuth.Deny(ctx, id)
	default:
		return models.ErrInvalid.Errorf("answer allow or deny")
	}
	if err != nil {
		return err
	}
	c.Redirect(http.StatusSeeOther, next)
	return nil
}
