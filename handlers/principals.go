package handlers

import (
	"net/http"
	"toolbelt/services/access"

	"github.com/gin-gonic/gin"
)

// PrincipalList lists accounts.
type PrincipalList struct {
	Principals []access.Principal `json:"principals"`
}

// Me describes the caller.
type Me struct {
	ID   uint   `json:"id" example:"1"`
	Name string `json:"name" example:"admin"`
	Role string `json:"role" example:"admin"`
}

// CreatePrincipal creates an account with a first API key.
//
//	@Summary		Create a principal
//	@ID			createPrincipal
//	@Description	Creates an admin, reviewer or agent with a first API key. The key is in this answer only; Toolbelt stores its hash.
//	@Tags			access
//	@Accept			json
//	@Produce		json
//	@Param			principal	body		access.NewPrincipal	true	"Name and role"
//	@Success		201			{object}	access.CreatedPrincipal
//	@Failure		400			{object}	ErrorBody
//	@Failure		401			{object}	ErrorBody
//	@Failure		403			{object}	ErrorBody
//	@Failure		409			{object}	ErrorBody	"name taken"
//	@Failure		422			{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/principals [post]
func (h *Handler) CreatePrincipal(c *gin.Context) error {
	var in access.NewPrincipal
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	out, err := h.Accounts.CreatePrincipal(c.Request.Context(), in, CurrentPrincipal(c))
	if err != nil {
		return err
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, out)
	return nil
}

// ListPrincipals lists accounts and their keys.
//
//	@Summary		List principals
//	@ID			listPrincipals
//	@Description	Every principal with its keys (prefix, creation, last use, revocation; never the key itself).
//	@Tags			access
//	@Produce		json
//	@Success		200	{object}	PrincipalList
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/principals [get]
func (h *Handler) ListPrincipals(c *gin.Context) error {
	ps, err := h.Accounts.Principals(c.Request.Context())
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, PrincipalList{Principals: ps})
	return nil
}

// IssueKey adds an API key to a principal.
//
//	@Summary		Issue an API key
//	@ID			issueKey
//	@Description	Adds a key to the principal, with an optional label and expiry (the body may be left out). The key is in this answer only. An expired key is refused with 401 saying it expired.
//	@Tags			access
//	@Accept			json
//	@Produce		json
//	@Param			id		path		int					true	"Principal id"
//	@Param			options	body		access.KeyOptions	false	"Label and expiry"
//	@Success		201		{object}	access.NewKey
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Failure		422		{object}	ErrorBody	"label too long, expiry not in the future"
//	@Security		BearerAuth
//	@Router			/api/v1/principals/{id}/keys [post]
func (h *Handler) IssueKey(c *gin.Context) error {
	id, err := IDParam(c, "id")
	if err != nil {
		return err
	}
	var opts access.KeyOptions
	if c.Request.ContentLength != 0 {
		if err := bindJSON(c, &opts); err != nil {
			return err
		}
	}
	key, err := h.Accounts.IssueKey(c.Request.Context(), id, opts, CurrentPrincipal(c))
	if err != nil {
		return err
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, key)
	return nil
}

// RevokeKey revokes an API key.
//
//	@Summary		Revoke an API key
//	@ID			revokeKey
//	@Description	The key stops working at once. The last active admin key cannot be revoked (409).
//	@Tags			access
//	@Param			id	path	int	true	"Key id"
//	@Success		204
//	@Failure		400	{object}	ErrorBody
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody
//	@Failure		404	{object}	ErrorBody
//	@Failure		409	{object}	ErrorBody	"last admin key"
//	@Security		BearerAuth
//	@Router			/api/v1/keys/{id} [delete]
func (h *Handler) RevokeKey(c *gin.Context) error {
	id, err := IDParam(c, "id")
	if err != nil {
		return err
	}
	if _, err := h.Accounts.RevokeKey(c.Request.Context(), id, CurrentPrincipal(c)); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// DisablePrincipal stops a principal's keys working.
//
//	@Summary		Disable a principal
//	@ID			disablePrincipal
//	@Description	Every key of the principal is refused at once, on every instance (401 saying the principal is disabled), and its console sessions end. Its keys work again once enabled. You cannot disable yourself (403) or the last admin with a working key (409).
//	@Tags			access
//	@Produce		json
//	@Param			id	path		int	true	"Principal id"
//	@Success		200	{object}	access.Principal
//	@Failure		400	{object}	ErrorBody
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody	"yourself"
//	@Failure		404	{object}	ErrorBody
//	@Failure		409	{object}	ErrorBody	"last admin"
//	@Security		BearerAuth
//	@Router			/api/v1/principals/{id}/disable [post]
func (h *Handler) DisablePrincipal(c *gin.Context) error { return h.setDisabled(c, true) }

// EnablePrincipal lets a disabled principal's keys work again.
//
//	@Summary		Enable a principal
//	@ID			enablePrincipal
//	@Description	The principal's keys that are neither revoked nor expired work again.
//	@Tags			access
//	@Produce		json
//	@Param			id	path		int	true	"Principal id"
//	@Success		200	{object}	access.Principal
//	@Failure		400	{object}	ErrorBody
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody
//	@Failure		404	{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/principals/{id}/enable [post]
func (h *Handler) EnablePrincipal(c *gin.Context) error { return h.setDisabled(c, false) }

func (h *Handler) setDisabled(c *gin.Context, disabled bool) error {
	id, err := IDParam(c, "id")
	if err != nil {
		return err
	}
	p, err := h.Accounts.SetDisabled(c.Request.Context(), id, disabled, CurrentPrincipal(c))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, p)
	return nil
}

// DeletePrincipal removes a principal.
//
//	@Summary		Delete a principal
//	@ID			deletePrincipal
//	@Description	Removes the principal with its keys (refused at once), console sessions and grants. Its calls and the audit log keep its name. You cannot delete yourself (403) or the last admin with a working key (409).
//	@Tags			access
//	@Param			id	path	int	true	"Principal id"
//	@Success		204
//	@Failure		400	{object}	ErrorBody
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody	"yourself"
//	@Failure		404	{object}	ErrorBody
//	@Failure		409	{object}	ErrorBody	"last admin"
//	@Security		BearerAuth
//	@Router			/api/v1/principals/{id} [delete]
func (h *Handler) DeletePrincipal(c *gin.Context) error {
	id, err := IDParam(c, "id")
	if err != nil {
		return err
	}
	if err := h.Accounts.DeletePrincipal(c.Request.Context(), id, CurrentPrincipal(c)); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// SetGrants replaces what an agent may use.
//
//	@Summary		Set an agent's grants
//	@ID			setGrants
//	@Description	Replaces the categories and tools the agent may use, stored as Casbin policies (in the same database) for selection and calls to enforce.
//	@Tags			access
//	@Accept			json
//	@Produce		json
//	@Param			id		path		int				true	"Principal id"
//	@Param			grants	body		access.Grants	true	"Categories and tools"
//	@Success		200		{object}	access.Grants
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Failure		422		{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/principals/{id}/grants [put]
func (h *Handler) SetGrants(c *gin.Context) error {
	id, err := IDParam(c, "id")
	if err != nil {
		return err
	}
	var g access.Grants
	if err := bindJSON(c, &g); err != nil {
		return err
	}
	out, err := h.Accounts.SetGrants(c.Request.Context(), id, g, CurrentPrincipal(c))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, out)
	return nil
}

// Grants returns what an agent may use.
//
//	@Summary		Get an agent's grants
//	@ID			grants
//	@Tags			access
//	@Produce		json
//	@Param			id	path		int	true	"Principal id"
//	@Success		200	{object}	access.Grants
//	@Failure		400	{object}	ErrorBody
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody
//	@Failure		404	{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/principals/{id}/grants [get]
func (h *Handler) Grants(c *gin.Context) error {
	id, err := IDParam(c, "id")
	if err != nil {
		return err
	}
	g, err := h.Accounts.Grants(c.Request.Context(), id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, g)
	return nil
}

// WhoAmI describes the caller.
//
//	@Summary		Who am I
//	@ID			whoAmI
//	@Description	The principal the API key belongs to.
//	@Tags			access
//	@Produce		json
//	@Success		200	{object}	Me
//	@Failure		401	{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/me [get]
func (h *Handler) WhoAmI(c *gin.Context) error {
	p := CurrentPrincipal(c)
	c.JSON(http.StatusOK, Me{ID: p.ID, Name: p.Name, Role: p.Role})
	return nil
}
