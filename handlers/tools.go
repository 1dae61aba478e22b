package handlers

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"toolbelt/models"
	"toolbelt/services/catalog"
	"toolbelt/services/tooldef"
)

// ToolList is one page of the catalog. Without format, tools holds
// summaries; with format, each entry is exactly what that LLM API accepts
// as one tool (an OpenAI tool object, an Anthropic tool, a Gemini function
// declaration, an MCP tool), written by writeExports, so the document
// describes the summaries.
type ToolList struct {
	// Tools are summaries; with format, the renderings for that LLM API instead.
	Tools      []catalog.ToolSummary `json:"tools"`
	Format     string                `json:"format,omitempty" example:"openai"`
	Total      int64                 `json:"total" example:"8"`
	Limit      int                   `json:"limit" example:"100"`
	Offset     int                   `json:"offset" example:"0"`
	NextOffset *int                  `json:"next_offset,omitempty" example:"100"`
	// SearchTool, with format=anthropic&defer_loading=true, is the tool to
	// send Claude, not deferred, beside the deferred ones: it answers with
	// the tool_references of POST /tools/select (Anthropic's tool search).
	SearchTool json.RawMessage `json:"search_tool,omitempty" swaggertype:"object"`
}

// pageInfo is ToolList without its tools.
type pageInfo struct {
	Format     string          `json:"format,omitempty"`
	Total      int64           `json:"total"`
	Limit      int             `json:"limit"`
	Offset     int             `json:"offset"`
	NextOffset *int            `json:"next_offset,omitempty"`
	SearchTool json.RawMessage `json:"search_tool,omitempty"`
}

// writeExports writes a ToolList whose tools are stored renderings. They
// are compact JSON made by Render, so they are copied as they are instead
// of being parsed and re-encoded: a 10,000-tool export is megabytes.
func writeExports(c *gin.Context, exports []json.RawMessage, info pageInfo) error {
	tail, err := json.Marshal(info)
	if err != nil {
		return err
	}
	size := len(tail) + 16
	for _, e := range exports {
		size += len(e) + 1
	}
	buf := make([]byte, 0, size)
	buf = append(buf, `{"tools":[`...)
	for i, e := range exports {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, e...)
	}
	buf = append(buf, "],"...)
	buf = append(buf, tail[1:]...)
	c.Data(http.StatusOK, "application/json; charset=utf-8", buf)
	return nil
}

// RollbackRequest names the version to make current.
type RollbackRequest struct {
	Version string `json:"version" example:"1.0.0"`
}

// CategoryList is the category index.
type CategoryList struct {
	Categories []catalog.CategoryCount `json:"categories"`
}

// VersionList is a tool's version history.
type VersionList struct {
	Name     string                `json:"name" example:"file_read"`
	Versions []catalog.ToolVersion `json:"versions"`
}

// RegisterTool registers a new tool.
//
//	@Summary		Register a tool
//	@ID			registerTool
//	@Description	Validates the definition (JSON Schema 2020-12 parameters with a root object, snake_case unique name, semver, bounds, runner fields) and stores it as version one. A bad definition answers 422 listing every problem with its JSON pointer; nothing is stored.
//	@Tags			tools
//	@Accept			json
//	@Produce		json
//	@Param			definition	body		tooldef.Definition	true	"Tool definition"
//	@Success		201			{object}	catalog.Tool
//	@Failure		400			{object}	ErrorBody	"malformed JSON or unknown field"
//	@Failure		401			{object}	ErrorBody
//	@Failure		403			{object}	ErrorBody
//	@Failure		409			{object}	ErrorBody	"name already registered"
//	@Failure		413			{object}	ErrorBody
//	@Failure		415			{object}	ErrorBody
//	@Failure		422			{object}	ErrorBody	"every problem of the definition"
//	@Security		BearerAuth
//	@Router			/api/v1/tools [post]
func (h *Handler) RegisterTool(c *gin.Context) error {
	var def tooldef.Definition
	if err := bindJSON(c, &def); err != nil {
		return err
	}
	tool, err := h.Registry.Register(c.Request.Context(), def, CurrentPrincipal(c))
	if err != nil {
		return err
	}
	c.Header("Location", "/api/v1/tools/"+tool.Name)
	c.JSON(http.StatusCreated, tool)
	return nil
}

// ListTools lists the catalog.
//
//	@Summary		List tools
//	@ID			listTools
//	@Description	Lists active tools ordered by name, filtered and paginated. With format, each entry is the tool rendered for that LLM API, ready to put in its tools array.
//	@Tags			tools
//	@Produce		json
//	@Param			category		query		string	false	"Category"	Enums(filesystem, browser, shell, search, code, api)
//	@Param			tag				query		string	false	"Tag"
//	@Param			level			query		string	false	"Security level"	Enums(safe, moderate, dangerous)
//	@Param			q				query		string	false	"Text in the name or description"
//	@Param			format			query		string	false	"LLM format"	Enums(openai, openai_responses, anthropic, gemini, mcp)
//	@Param			include_retired	query		bool	false	"Include retired tools"
//	@Param			defer_loading	query		bool	false	"With format=anthropic: mark every tool defer_loading and add search_tool (Anthropic's tool search)"
//	@Param			limit			query		int		false	"Page size (default 100, at most 10000)"
//	@Param			offset			query		int		false	"Entries to skip"
//	@Success		200				{object}	ToolList
//	@Failure		401				{object}	ErrorBody
//	@Failure		400				{object}	ErrorBody	"unknown or out-of-range query parameter"
//	@Failure		403				{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/tools [get]
func (h *Handler) ListTools(c *gin.Context) error {
	if err := OnlyQuery(c, "category", "tag", "level", "q", "format", "include_retired", "defer_loading", "limit", "offset"); err != nil {
		return err
	}
	deferred, err := boolQuery(c, "defer_loading")
	if err != nil {
		return err
	}
	limit, err := IntQuery(c, "limit")
	if err != nil {
		return err
	}
	if c.Query("limit") == "" {
		limit = catalog.DefaultPageSize
	}
	offset, err := IntQuery(c, "offset")
	if err != nil {
		return err
	}
	includeRetired, err := boolQuery(c, "include_retired")
	if err != nil {
		return err
	}
	page, err := h.Registry.List(c.Request.Context(), catalog.ListOptions{
		Category: c.Query("category"), Tag: c.Query("tag"), Level: c.Query("level"), Query: c.Query("q"),
		Format: c.Query("format"), IncludeRetired: includeRetired, Limit: limit, Offset: offset, DeferLoading: deferred,
	})
	if err != nil {
		return err
	}
	var next *int
	if n := page.Offset + page.Limit; int64(n) < page.Total {
		next = &n
	}
	if page.Format != "" {
		return writeExports(c, page.Exports, pageInfo{Format: page.Format, Total: page.Total, Limit: page.Limit, Offset: page.Offset,
			NextOffset: next, SearchTool: page.SearchTool})
	}
	c.JSON(http.StatusOK, ToolList{Tools: page.Tools, Total: page.Total, Limit: page.Limit, Offset: page.Offset, NextOffset: next})
	return nil
}

// GetTool returns a tool's current version.
//
//	@Summary		Get a tool
//	@ID			getTool
//	@Description	The current version of an active tool, or with format its rendering for that LLM API instead: exactly the object that API takes in its tools array (an OpenAI or Responses tool, an Anthropic tool, a Gemini FunctionDeclaration, an MCP Tool), not a catalog.Tool. The OpenAPI 3 document (/openapi.json) describes both bodies. An unknown name answers 404 with suggestions: the closest real tools by name and by the session's last task.
//	@Tags			tools
//	@Produce		json
//	@Param			name	path		string	true	"Tool name"
//	@Param			format		query		string	false	"LLM format"	Enums(openai, openai_responses, anthropic, gemini, mcp)
//	@Param			session_id	query		string	false	"Session whose last selection guides suggestions for an unknown name"
//	@Success		200			{object}	catalog.Tool	"The current version; with format, the tool as that LLM API takes it instead"
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/tools/{name} [get]
func (h *Handler) GetTool(c *gin.Context) error {
	if err := OnlyQuery(c, "format", "session_id"); err != nil {
		return err
	}
	if format := c.Query("format"); format != "" {
		raw, err := h.Registry.Export(c.Request.Context(), c.Param("name"), format)
		if err != nil {
			return h.Selector.ExplainUnknown(c.Request.Context(), CurrentPrincipal(c), c.Query("session_id"), c.Param("name"), err)
		}
		c.Data(http.StatusOK, "application/json; charset=utf-8", raw)
		return nil
	}
	tool, err := h.Registry.Get(c.Request.Context(), c.Param("name"))
	if err != nil {
		return h.Selector.ExplainUnknown(c.Request.Context(), CurrentPrincipal(c), c.Query("session_id"), c.Param("name"), err)
	}
	c.JSON(http.StatusOK, tool)
	return nil
}

// PublishTool publishes a new version of a tool.
//
//	@Summary		Publish a new version
//	@ID			publishTool
//	@Description	Stores the definition as the new current version. Its version must be greater (semver) than every earlier one; earlier versions stay immutable and readable. Publishing restores a retired tool.
//	@Tags			tools
//	@Accept			json
//	@Produce		json
//	@Param			name		path		string					true	"Tool name"
//	@Param			definition	body		tooldef.Definition	true	"Tool definition (name may be omitted)"
//	@Success		200			{object}	catalog.Tool
//	@Failure		400			{object}	ErrorBody
//	@Failure		401			{object}	ErrorBody
//	@Failure		403			{object}	ErrorBody
//	@Failure		404			{object}	ErrorBody
//	@Failure		409			{object}	ErrorBody	"the same version was published concurrently"
//	@Failure		422			{object}	ErrorBody	"invalid definition, or a version not greater than every published one"
//	@Security		BearerAuth
//	@Router			/api/v1/tools/{name} [put]
func (h *Handler) PublishTool(c *gin.Context) error {
	name := c.Param("name")
	if !tooldef.NamePattern.MatchString(name) {
		return models.ErrInvalid.Errorf("%q is not a tool name", name)
	}
	var def tooldef.Definition
	if err := bindJSON(c, &def); err != nil {
		return err
	}
	tool, err := h.Registry.Publish(c.Request.Context(), name, def, CurrentPrincipal(c))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, tool)
	return nil
}

// ToolVersions lists a tool's versions.
//
//	@Summary		List versions
//	@ID			toolVersions
//	@Description	Every version of the tool, oldest first, marking the current one. Retired tools keep their history.
//	@Tags			tools
//	@Produce		json
//	@Param			name	path		string	true	"Tool name"
//	@Success		200		{object}	VersionList
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/tools/{name}/versions [get]
func (h *Handler) ToolVersions(c *gin.Context) error {
	vers, err := h.Registry.Versions(c.Request.Context(), c.Param("name"))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, VersionList{Name: c.Param("name"), Versions: vers})
	return nil
}

// ToolVersion returns one version of a tool.
//
//	@Summary		Get one version
//	@ID			toolVersion
//	@Tags			tools
//	@Produce		json
//	@Param			name	path		string	true	"Tool name"
//	@Param			version	path		string	true	"Semantic version"
//	@Success		200		{object}	catalog.Tool
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/tools/{name}/versions/{version} [get]
func (h *Handler) ToolVersion(c *gin.Context) error {
	tool, err := h.Registry.Version(c.Request.Context(), c.Param("name"), c.Param("version"))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, tool)
	return nil
}

// RollbackTool makes an earlier version current.
//
//	@Summary		Roll back
//	@ID			rollbackTool
//	@Description	Makes an existing version current again (and restores a retired tool). No version is created or changed.
//	@Tags			tools
//	@Accept			json
//	@Produce		json
//	@Param			name	path		string			true	"Tool name"
//	@Param			request	body		RollbackRequest	true	"Version to make current"
//	@Success		200		{object}	catalog.Tool
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Failure		422		{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/tools/{name}/rollback [post]
func (h *Handler) RollbackTool(c *gin.Context) error {
	var req RollbackRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	tool, err := h.Registry.Rollback(c.Request.Context(), c.Param("name"), req.Version, CurrentPrincipal(c))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, tool)
	return nil
}

// RetireTool retires a tool.
//
//	@Summary		Retire a tool
//	@ID			retireTool
//	@Description	Takes the tool out of the catalog and of selection. Its versions stay readable; publishing a new version or rolling back restores it.
//	@Tags			tools
//	@Param			name	path	string	true	"Tool name"
//	@Success		204
//	@Failure		400	{object}	ErrorBody
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody
//	@Failure		404	{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/tools/{name} [delete]
func (h *Handler) RetireTool(c *gin.Context) error {
	if err := h.Registry.Retire(c.Request.Context(), c.Param("name"), CurrentPrincipal(c)); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// Categories lists categories with their tool counts.
//
//	@Summary		Category index
//	@ID			categories
//	@Description	Every category with its number of active tools.
//	@Tags			tools
//	@Produce		json
//	@Success		200	{object}	CategoryList
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/categories [get]
func (h *Handler) Categories(c *gin.Context) error {
	cats, err := h.Registry.Categories(c.Request.Context())
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, CategoryList{Categories: cats})
	return nil
}

func boolQuery(c *gin.Context, name string) (bool, error) {
	s := c.Query(name)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, models.ErrInvalid.Errorf("query parameter %s=%q is not true or false", name, s)
	}
	return b, nil
}

// OnlyQuery refuses query parameters the endpoint does not know, so a typo
// such as "categroy" is an error instead of a silently unfiltered answer.
func OnlyQuery(c *gin.Context, known ...string) error {
	for name := range c.Request.URL.Query() {
		if !slices.Contains(known, name) {
			return models.ErrInvalid.Errorf("unknown query parameter %q (this endpoint takes %s)", name, strings.Join(known, ", "))
		}
	}
	return nil
}
