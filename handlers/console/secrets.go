package console

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"toolbelt/handlers"
	"toolbelt/models"
	"toolbelt/services/runners"
	"toolbelt/views"
)

// secretsPage is the signed-in person's secrets page.
const secretsPage = runners.SecretsPage

// SecretsPage lists the signed-in person's own secrets (names and dates)
// with the form that stores one, its name prefilled from ?name= (the link
// a call answers when the secret is missing).
func (h *Handler) SecretsPage(c *gin.Context) error {
	return h.renderSecrets(c, http.StatusOK, c.Query("name"), "")
}

// SetSecretForm stores (or replaces) one of the person's secrets.
func (h *Handler) SetSecretForm(c *gin.Context) error {
	name := c.PostForm("name")
	_, err := h.Secrets.Put(c.Request.Context(), handlers.CurrentPrincipal(c), name, c.PostForm("value"))
	if secretRefused(err) {
		return h.renderSecrets(c, handlers.ErrorStatus(err), name, "Not stored: "+personMessage(err)+".")
	}
	if err != nil {
		return err
	}
	return Redirect(c, secretsPage, fmt.Sprintf("%s stored: tools send it in calls made as you.", name))
}

// DeleteSecretForm deletes one of the person's secrets.
func (h *Handler) DeleteSecretForm(c *gin.Context) error {
	name := c.Param("name")
	err := h.Secrets.Delete(c.Request.Context(), handlers.CurrentPrincipal(c), name)
	if secretRefused(err) {
		return h.renderSecrets(c, handlers.ErrorStatus(err), "", "Not deleted: "+personMessage(err)+".")
	}
	if err != nil {
		return err
	}
	return Redirect(c, secretsPage, fmt.Sprintf("%s deleted.", name))
}

func (h *Handler) renderSecrets(c *gin.Context, status int, name, alert string) error {
	list, err := h.Secrets.List(c.Request.Context(), handlers.CurrentPrincipal(c).ID)
	if err != nil {
		return err
	}
	d := views.SecretsData{Name: name, Error: alert}
	for _, s := range list {
		d.Secrets = append(d.Secrets, views.SecretRow{Name: s.Name, Created: s.CreatedAt, Updated: s.UpdatedAt})
	}
	return h.Render(c, status, views.Secrets(h.Page(c, "My secrets"), d))
}

// secretRefused reports whether err is the person's to fix (a name or
// value refused, a secret already gone): shown on the page, not as an
// error page.
func secretRefused(err error) bool {
	return errors.Is(err, models.ErrInvalid) || errors.Is(err, models.ErrNotFound)
}
