package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"toolbelt/services/vault"
)

// SecretList is the caller's stored secrets: names and dates, never
// values.
type SecretList struct {
	Secrets []vault.Secret `json:"secrets"`
}

// SecretValue is the body that stores a secret.
type SecretValue struct {
	// Value is the secret (one line, at most 8 KiB). It is sealed by the
	// server's vault and never shown again.
	Value string `json:"value" example:"ghp_0123456789abcdef0123456789abcdef0123"`
}

// MySecrets lists the caller's own secrets.
//
//	@Summary		My stored secrets
//	@ID			mySecrets
//	@Description	The secrets the caller stored for tools that send {{user.secret.NAME}} on their behalf: names and when they were set, never the values, which nobody reads back.
//	@Tags			secrets
//	@Produce		json
//	@Success		200	{object}	SecretList
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/me/secrets [get]
func (h *Handler) MySecrets(c *gin.Context) error {
	list, err := h.Secrets.List(c.Request.Context(), CurrentPrincipal(c).ID)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, SecretList{Secrets: list})
	return nil
}

// PutMySecret stores (or replaces) one of the caller's own secrets.
//
//	@Summary		Store one of my secrets
//	@ID			putMySecret
//	@Description	Stores value as the caller's secret NAME, replacing the one stored: tools whose headers name {{user.secret.NAME}} send it in calls that act for the caller, and no one else's calls. The value is sealed by the server's vault, removed from every tool output, and never shown again. An OAuth token needs the secrets:write scope (tools:call is not enough: an agent host that calls tools should not plant the secrets they send).
//	@Tags			secrets
//	@Accept			json
//	@Produce		json
//	@Param			name	path		string		true	"Secret name: an upper-case letter then up to 63 of A-Z, 0-9 and _, such as GITHUB_TOKEN"
//	@Param			body	body		SecretValue	true	"The value"
//	@Success		200		{object}	vault.Secret
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/me/secrets/{name} [put]
func (h *Handler) PutMySecret(c *gin.Context) error {
	var in SecretValue
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	s, err := h.Secrets.Put(c.Request.Context(), CurrentPrincipal(c), c.Param("name"), in.Value)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, s)
	return nil
}

// DeleteMySecret deletes one of the caller's own secrets.
//
//	@Summary		Delete one of my secrets
//	@ID			deleteMySecret
//	@Description	Deletes the caller's secret NAME: calls of tools that send it answer UPSTREAM_NOT_CONNECTED from now on. An OAuth token needs the secrets:write scope.
//	@Tags			secrets
//	@Param			name	path	string	true	"Secret name, such as GITHUB_TOKEN"
//	@Success		204
//	@Failure		400	{object}	ErrorBody
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody
//	@Failure		404	{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/me/secrets/{name} [delete]
func (h *Handler) DeleteMySecret(c *gin.Context) error {
	if err := h.Secrets.Delete(c.Request.Context(), CurrentPrincipal(c), c.Param("name")); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}
