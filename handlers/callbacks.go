package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// CallbackSecret returns the caller's callback signing secret.
//
//	@Summary		My callback signing secret
//	@ID			callbackSecret
//	@Description	The secret that signs the results POSTed to the caller's callback URLs (Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature v1 = base64 HMAC-SHA256 over id.timestamp.body, keyed by the base64-decoded part after whsec_). It is derived from the server's key and never stored; the answer is not cached.
//	@Tags			callbacks
//	@Produce		json
//	@Success		200	{object}	callbacks.Secret
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/me/callback-secret [get]
func (h *Handler) CallbackSecret(c *gin.Context) error {
	s, err := h.CallbackSecrets.Of(c.Request.Context(), CurrentPrincipal(c).ID)
	if err != nil {
		return err
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, s)
	return nil
}

// RotateCallbackSecret replaces the caller's callback signing secret.
//
//	@Summary		Rotate my callback signing secret
//	@ID			rotateCallbackSecret
//	@Description	Moves the caller's secret to its next generation and returns it: every delivery attempted from now on, those being retried included, is signed with the new secret only.
//	@Tags			callbacks
//	@Produce		json
//	@Success		200	{object}	callbacks.Secret
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/me/callback-secret/rotate [post]
func (h *Handler) RotateCallbackSecret(c *gin.Context) error {
	return h.rotateCallbackSecret(c, CurrentPrincipal(c).ID)
}

// RotatePrincipalCallbackSecret replaces any principal's callback secret.
//
//	@Summary		Rotate a principal's callback signing secret
//	@ID			rotatePrincipalCallbackSecret
//	@Description	Moves the principal's secret to its next generation (for a secret that leaked) and returns it, to hand to whoever receives that principal's callbacks.
//	@Tags			callbacks
//	@Produce		json
//	@Param			id	path		int	true	"Principal id"
//	@Success		200	{object}	callbacks.Secret
//	@Failure		400	{object}	ErrorBody
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody
//	@Failure		404	{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/principals/{id}/callback-secret/rotate [post]
func (h *Handler) RotatePrincipalCallbackSecret(c *gin.Context) error {
	id, err := IDParam(c, "id")
	if err != nil {
		return err
	}
	return h.rotateCallbackSecret(c, id)
}

func (h *Handler) rotateCallbackSecret(c *gin.Context, id uint) error {
	s, err := h.CallbackSecrets.Rotate(c.Request.Context(), id)
	if err != nil {
		return err
	}
	h.Log.InfoContext(c.Request.Context(), "callback secret rotated", "principal_id", id, "generation", s.Generation, "by", CurrentPrincipal(c).Name)
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, s)
	return nil
}

// withCallbacks adds to records the deliveries of their results.
func (h *Handler) withCallbacks(c *gin.Context, recs []CallRecord) error {
	ids := make([]string, len(recs))
	for i := range recs {
		ids[i] = recs[i].ID
	}
	cbs, err := h.Invoker.Callbacks(c.Request.Context(), ids...)
	if err != nil {
		return err
	}
	for i := range recs {
		recs[i].Callback = cbs[recs[i].ID]
	}
	return nil
}
