package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"toolbelt/models"
	"toolbelt/services/tooldef"
	"toolbelt/services/upstream"
)

// AddedUpstream is the answer to adding an upstream server: the server
// and what was found on it.
type AddedUpstream struct {
	Server *upstream.Server `json:"server"`
	Report *upstream.Report `json:"report"`
}

// AcceptedTool names the Toolbelt tool an accepted definition made or
// published.
type AcceptedTool struct {
	Tool string `json:"tool" example:"everything__echo"`
}

// serverName reads the :name path parameter as an upstream's name.
func serverName(c *gin.Context) (string, error) {
	name := c.Param("name")
	if !tooldef.ServerNamePattern.MatchString(name) {
		return "", models.ErrInvalid.Errorf("%q is not an upstream server name (lower-case letters, digits and '-', at most 32)", name)
	}
	return name, nil
}

// AddUpstream registers an upstream MCP server.
//
//	@Summary		Add an upstream MCP server
//	@ID			addUpstream
//	@Description	Connects to an MCP server — a command Toolbelt runs in the sandbox over stdio, or a Streamable HTTP or legacy SSE endpoint reached under the outbound policy — lists its tools and makes each a Toolbelt tool named <server>__<tool> (snake_case), in the server's category, its security level from its MCP annotations (readOnlyHint safe, destructiveHint false moderate, else dangerous: approval), its input schema as served (converted to JSON Schema 2020-12 when it names an older draft). What it serves now is accepted and pinned: later changes wait for an admin (accept). A server that does not start or answer initialize and tools/list is refused (422) and nothing is stored; a taken server name is 409. A tool that cannot be a Toolbelt tool (no name, a name served twice or holding control, bidi or non-ASCII characters, a Toolbelt name another tool has, an invalid or oversized definition) is refused alone, with why, in report.refused and on the server; the other tools are accepted. Secrets in env and headers are references, {{env.NAME}}, never values.
//	@Tags			upstreams
//	@Accept			json
//	@Produce		json
//	@Param			server	body		upstream.Spec	true	"The server"
//	@Success		201		{object}	AddedUpstream
//	@Failure		400		{object}	ErrorBody	"malformed JSON or unknown field"
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		409		{object}	ErrorBody	"the server's name is taken"
//	@Failure		413		{object}	ErrorBody
//	@Failure		415		{object}	ErrorBody
//	@Failure		422		{object}	ErrorBody	"an invalid field, or a server that does not start or answer"
//	@Security		BearerAuth
//	@Router			/api/v1/upstreams [post]
func (h *Handler) AddUpstream(c *gin.Context) error {
	var spec upstream.Spec
	if err := bindJSON(c, &spec); err != nil {
		return err
	}
	u, rep, err := h.Upstreams.Add(c.Request.Context(), spec, CurrentPrincipal(c))
	return h.answerUpstream(c, http.StatusCreated, u, rep, err)
}

// answerUpstream answers with u as it stands and what was found on it,
// or with err.
func (h *Handler) answerUpstream(c *gin.Context, status int, u *models.Upstream, rep *upstream.Report, err error) error {
	if err != nil {
		return err
	}
	s, err := h.Upstreams.Server(c.Request.Context(), u.Name)
	if err != nil {
		return err
	}
	c.JSON(status, AddedUpstream{Server: s, Report: rep})
	return nil
}

// UpdateUpstream changes an upstream server's registration.
//
//	@Summary		Change an upstream MCP server's registration
//	@ID			updateUpstream
//	@Description	Replaces where and how the server runs (transport, command, env, mounts, url, headers, network, isolation, limits, category) with the body, a whole registration as added; its name is the path's (a body naming another server is 422). The new registration is tried first: a server that does not start or answer is refused (422) and the old registration stays. Then it is stored (audited as upstream.update), the server's connections close, and its tools are compared with what was accepted: a changed or new tool is held pending for an admin as a sync holds it, so a new command or URL never changes a tool unseen. A body registering the server as it is changes nothing (report null).
//	@Tags			upstreams
//	@Accept			json
//	@Produce		json
//	@Param			name	path		string			true	"Server name"
//	@Param			server	body		upstream.Spec	true	"The whole registration"
//	@Success		200		{object}	AddedUpstream
//	@Failure		400		{object}	ErrorBody	"malformed JSON or unknown field"
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Failure		413		{object}	ErrorBody
//	@Failure		415		{object}	ErrorBody
//	@Failure		422		{object}	ErrorBody	"an invalid field, another server's name, or a server that does not start or answer"
//	@Security		BearerAuth
//	@Router			/api/v1/upstreams/{name} [put]
func (h *Handler) UpdateUpstream(c *gin.Context) error {
	name, err := serverName(c)
	if err != nil {
		return err
	}
	var spec upstream.Spec
	if err := bindJSON(c, &spec); err != nil {
		return err
	}
	if spec.Name == "" {
		spec.Name = name
	}
	if spec.Name != name {
		return &models.ValidationError{What: "upstream server", Problems: []models.Problem{{Pointer: "/name",
			Message: "names " + spec.Name + ", not " + name + ": a server cannot be renamed; add it under the new name and delete the old one"}}}
	}
	u, rep, err := h.Upstreams.Update(c.Request.Context(), spec, CurrentPrincipal(c))
	return h.answerUpstream(c, http.StatusOK, u, rep, err)
}

// ListUpstreams lists the upstream servers.
//
//	@Summary		List upstream MCP servers
//	@ID			listUpstreams
//	@Description	Every registered upstream server with its tools: each one's state (active, new: served but never accepted, gone: no longer served) and, while the server serves a definition other than the accepted one, both definitions and the fields that changed.
//	@Tags			upstreams
//	@Produce		json
//	@Success		200	{array}		upstream.Server
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/upstreams [get]
func (h *Handler) ListUpstreams(c *gin.Context) error {
	if err := OnlyQuery(c); err != nil {
		return err
	}
	out, err := h.Upstreams.Servers(c.Request.Context())
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, out)
	return nil
}

// GetUpstream shows one upstream server.
//
//	@Summary		Show an upstream MCP server
//	@ID			getUpstream
//	@Description	The server's registration, its open connections here, and its tools as in the list.
//	@Tags			upstreams
//	@Produce		json
//	@Param			name	path		string	true	"Server name"
//	@Success		200		{object}	upstream.Server
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/upstreams/{name} [get]
func (h *Handler) GetUpstream(c *gin.Context) error {
	name, err := serverName(c)
	if err != nil {
		return err
	}
	s, err := h.Upstreams.Server(c.Request.Context(), name)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, s)
	return nil
}

// SyncUpstream reads what an upstream serves now.
//
//	@Summary		Look again at an upstream's tools
//	@ID			syncUpstream
//	@Description	Lists the server's tools and compares each with the accepted definition: a changed or new one is held pending (audited) and its calls keep the accepted version; one no longer served is gone and its calls are refused; one served again as accepted is active again; one that cannot be a Toolbelt tool is refused with why (report.refused, the tool's refused, audited as upstream.refuse) and its accepted definition, if any, kept.
//	@Tags			upstreams
//	@Produce		json
//	@Param			name	path		string	true	"Server name"
//	@Success		200		{object}	upstream.Report
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Failure		500		{object}	ErrorBody	"the server could not be reached"
//	@Security		BearerAuth
//	@Router			/api/v1/upstreams/{name}/sync [post]
func (h *Handler) SyncUpstream(c *gin.Context) error {
	name, err := serverName(c)
	if err != nil {
		return err
	}
	rep, err := h.Upstreams.Sync(c.Request.Context(), name, false, CurrentPrincipal(c))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, rep)
	return nil
}

// AcceptUpstreamTool accepts a tool's pending definition.
//
//	@Summary		Accept an upstream tool's pending definition
//	@ID			acceptUpstreamTool
//	@Description	The definition the server serves now becomes the accepted one: a new Toolbelt tool (a new tool) or its next patch version (a changed one), audited. Calls use it from then on.
//	@Tags			upstreams
//	@Produce		json
//	@Param			name	path		string	true	"Server name"
//	@Param			tool	path		string	true	"The tool's name on the server"
//	@Success		200		{object}	AcceptedTool
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Failure		409		{object}	ErrorBody	"nothing pending"
//	@Failure		422		{object}	ErrorBody	"the definition cannot be a Toolbelt tool"
//	@Security		BearerAuth
//	@Router			/api/v1/upstreams/{name}/tools/{tool}/accept [post]
func (h *Handler) AcceptUpstreamTool(c *gin.Context) error {
	name, err := serverName(c)
	if err != nil {
		return err
	}
	tool, err := h.Upstreams.Accept(c.Request.Context(), name, c.Param("tool"), CurrentPrincipal(c))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, AcceptedTool{Tool: tool})
	return nil
}

// DisableUpstream stops an upstream's tools running.
//
//	@Summary		Disable an upstream MCP server
//	@ID			disableUpstream
//	@Description	Its tools refuse calls and its connections close (stdio processes end), until enabled.
//	@Tags			upstreams
//	@Produce		json
//	@Param			name	path		string	true	"Server name"
//	@Success		200		{object}	upstream.Server
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/upstreams/{name}/disable [post]
func (h *Handler) DisableUpstream(c *gin.Context) error { return h.setUpstreamDisabled(c, true) }

// EnableUpstream lets a disabled upstream's tools run again.
//
//	@Summary		Enable an upstream MCP server
//	@ID			enableUpstream
//	@Description	Its tools run again; a stdio server starts on the next call.
//	@Tags			upstreams
//	@Produce		json
//	@Param			name	path		string	true	"Server name"
//	@Success		200		{object}	upstream.Server
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/upstreams/{name}/enable [post]
func (h *Handler) EnableUpstream(c *gin.Context) error { return h.setUpstreamDisabled(c, false) }

func (h *Handler) setUpstreamDisabled(c *gin.Context, disabled bool) error {
	name, err := serverName(c)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	if err := h.Upstreams.SetDisabled(ctx, name, disabled); err != nil {
		return err
	}
	s, err := h.Upstreams.Server(ctx, name)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, s)
	return nil
}

// DeleteUpstream removes an upstream server.
//
//	@Summary		Delete an upstream MCP server
//	@ID			deleteUpstream
//	@Description	The server is forgotten and the tools made from it are retired (their calls stay in the history).
//	@Tags			upstreams
//	@Param			name	path	string	true	"Server name"
//	@Success		204
//	@Failure		400	{object}	ErrorBody
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody
//	@Failure		404	{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/upstreams/{name} [delete]
func (h *Handler) DeleteUpstream(c *gin.Context) error {
	name, err := serverName(c)
	if err != nil {
		return err
	}
	if err := h.Upstreams.Delete(c.Request.Context(), name); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// SetUpstreamTool sets an admin's level and category for an upstream tool.
//
//	@Summary		Set an upstream tool's level and category
//	@ID			setUpstreamTool
//	@Description	Overrides what the tool's MCP annotations (level) and its server (category) give; an empty field goes back to them. The tool's accepted definition is published again as its next patch version with them, audited.
//	@Tags			upstreams
//	@Accept			json
//	@Produce		json
//	@Param			name		path		string				true	"Server name"
//	@Param			tool		path		string				true	"The tool's name on the server"
//	@Param			override	body		upstream.Override	true	"Level and category"
//	@Success		200			{object}	AcceptedTool
//	@Failure		400			{object}	ErrorBody
//	@Failure		401			{object}	ErrorBody
//	@Failure		403			{object}	ErrorBody
//	@Failure		404			{object}	ErrorBody
//	@Failure		409			{object}	ErrorBody	"the tool was never accepted"
//	@Failure		422			{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/upstreams/{name}/tools/{tool} [put]
func (h *Handler) SetUpstreamTool(c *gin.Context) error {
	name, err := serverName(c)
	if err != nil {
		return err
	}
	var o upstream.Override
	if err := bindJSON(c, &o); err != nil {
		return err
	}
	tool, err := h.Upstreams.SetOverride(c.Request.Context(), name, c.Param("tool"), o, CurrentPrincipal(c))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, AcceptedTool{Tool: tool})
	return nil
}

// SetUpstreamToolAlias names an upstream tool in Toolbelt.
//
//	@Summary		Rename an upstream tool (an alias)
//	@ID			setUpstreamToolAlias
//	@Description	The tool's Toolbelt name becomes the alias instead of <server>__<tool> (an empty alias goes back to that). An accepted tool is published under the new name and its old name retired, its callers told the new one; the name is kept when later definitions are accepted. A name any other tool has or had (retired tools keep their names), or another upstream tool would take, is refused (409). Audited as upstream.alias.
//	@Tags			upstreams
//	@Accept			json
//	@Produce		json
//	@Param			name	path		string			true	"Server name"
//	@Param			tool	path		string			true	"The tool's name on the server"
//	@Param			alias	body		upstream.Alias	true	"The Toolbelt name"
//	@Success		200		{object}	AcceptedTool
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Failure		409		{object}	ErrorBody	"the name is taken, or the tool is disabled"
//	@Failure		422		{object}	ErrorBody	"not a tool name"
//	@Security		BearerAuth
//	@Router			/api/v1/upstreams/{name}/tools/{tool}/alias [put]
func (h *Handler) SetUpstreamToolAlias(c *gin.Context) error {
	name, err := serverName(c)
	if err != nil {
		return err
	}
	var a upstream.Alias
	if err := bindJSON(c, &a); err != nil {
		return err
	}
	tool, err := h.Upstreams.SetAlias(c.Request.Context(), name, c.Param("tool"), a.Alias, CurrentPrincipal(c))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, AcceptedTool{Tool: tool})
	return nil
}

// DisableUpstreamTool switches one upstream tool off.
//
//	@Summary		Disable one tool of an upstream server
//	@ID			disableUpstreamTool
//	@Description	Its Toolbelt tool is retired — out of the catalog, selection and exports — and its calls are refused saying an administrator disabled it, until enabled. Audited as upstream.tool.disable.
//	@Tags			upstreams
//	@Produce		json
//	@Param			name	path		string	true	"Server name"
//	@Param			tool	path		string	true	"The tool's name on the server"
//	@Success		200		{object}	AcceptedTool
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Failure		409		{object}	ErrorBody	"the tool was never accepted"
//	@Security		BearerAuth
//	@Router			/api/v1/upstreams/{name}/tools/{tool}/disable [post]
func (h *Handler) DisableUpstreamTool(c *gin.Context) error {
	return h.setUpstreamToolDisabled(c, true)
}

// EnableUpstreamTool switches a disabled upstream tool on again.
//
//	@Summary		Enable one tool of an upstream server
//	@ID			enableUpstreamTool
//	@Description	Its accepted definition is published again as its next patch version: it is in the catalog and runs. Audited as upstream.tool.enable.
//	@Tags			upstreams
//	@Produce		json
//	@Param			name	path		string	true	"Server name"
//	@Param			tool	path		string	true	"The tool's name on the server"
//	@Success		200		{object}	AcceptedTool
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Failure		409		{object}	ErrorBody	"the tool was never accepted"
//	@Security		BearerAuth
//	@Router			/api/v1/upstreams/{name}/tools/{tool}/enable [post]
func (h *Handler) EnableUpstreamTool(c *gin.Context) error {
	return h.setUpstreamToolDisabled(c, false)
}

func (h *Handler) setUpstreamToolDisabled(c *gin.Context, disabled bool) error {
	name, err := serverName(c)
	if err != nil {
		return err
	}
	tool, err := h.Upstreams.SetToolDisabled(c.Request.Context(), name, c.Param("tool"), disabled, CurrentPrincipal(c))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, AcceptedTool{Tool: tool})
	return nil
}
