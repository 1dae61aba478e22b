package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"

	"toolbelt/models"
	"toolbelt/services/catalog"
)

// OpenAPIImportRequest is what POST /import/openapi takes: exactly one of
// document (a JSON object, or a string holding JSON or YAML) and url.
type OpenAPIImportRequest struct {
	// Document is the OpenAPI 3 or Swagger 2 document: a JSON object, or a
	// string holding JSON or YAML.
	Document json.RawMessage `json:"document,omitempty" swaggertype:"object"`
	// URL is fetched under the same SSRF policy as http tools.
	URL string `json:"url,omitempty" example:"https://petstore3.swagger.io/api/v3/openapi.json"`
	// BaseURL replaces the document's first server in every tool's URL.
	BaseURL string `json:"base_url,omitempty" example:"https://petstore.example.com/v1"`
	// Prefix goes before every tool name, with an underscore.
	Prefix string `json:"prefix,omitempty" example:"petstore"`
	// Tags keeps only the operations with one of these OpenAPI tags.
	Tags []string `json:"tags,omitempty"`
	// Operations keeps only the operations with these operationIds.
	Operations []string `json:"operations,omitempty"`
	// DryRun answers what would be registered and registers nothing.
	DryRun bool `json:"dry_run"`
	// Update publishes a new version (the next patch version) of each
	// tool already registered that the document changes, and leaves the
	// others as they are, instead of refusing names already registered.
	Update bool `json:"update"`
}

// ImportOpenAPI turns the operations of an OpenAPI document into http tools.
//
//	@Summary		Import tools from an OpenAPI document
//	@ID			importOpenAPI
//	@Description	Reads an OpenAPI 3 or Swagger 2 document (JSON or YAML, in the body or fetched from url under the SSRF policy) and makes each operation an http tool: the name from operationId in snake_case (or method and path), category api, security level moderate (dangerous for DELETE), the path, query and header parameters and a JSON request body (as "body") in one JSON Schema, and a runner calling the document's first server or base_url. With dry_run the answer (200) lists every operation with its tool, its problems and notes, and nothing is stored. Otherwise every tool is registered in one transaction (201), or none: any invalid tool answers 422 with problems located by operation, and a name already registered answers 409 (only new names are imported; use prefix) — unless update is set: then each registered tool the document changes gets its next patch version, the others are listed as unchanged, in the same transaction (200 when nothing changed).
//	@Tags			tools
//	@Accept			json
//	@Produce		json
//	@Param			request	body		OpenAPIImportRequest	true	"Document or URL, and options"
//	@Success		200		{object}	catalog.OpenAPIImportResult	"dry run: what would be registered; or an update that changed nothing"
//	@Success		201		{object}	catalog.OpenAPIImportResult	"registered tools (and, with update, new versions)"
//	@Failure		400		{object}	ErrorBody	"malformed JSON or unknown field"
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		409		{object}	ErrorBody	"a tool name is already registered (without update)"
//	@Failure		413		{object}	ErrorBody
//	@Failure		415		{object}	ErrorBody
//	@Failure		422		{object}	ErrorBody	"not an OpenAPI document, both or neither of document and url, or tools the registry refuses"
//	@Security		BearerAuth
//	@Router			/api/v1/import/openapi [post]
func (h *Handler) ImportOpenAPI(c *gin.Context) error {
	var req OpenAPIImportRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	doc := bytes.TrimSpace(req.Document)
	switch {
	case bytes.Equal(doc, []byte("null")):
		doc = nil
	case len(doc) > 0 && doc[0] == '"':
		var s string
		if err := json.Unmarshal(doc, &s); err != nil {
			return models.ErrInvalid.Errorf("document: %v", err)
		}
		doc = []byte(s)
	case len(doc) > 0 && doc[0] != '{':
		return &models.ValidationError{What: "OpenAPI import", Problems: []models.Problem{{
			Pointer: "/document", Message: "must be the document as a JSON object, or a string holding JSON or YAML"}}}
	}
	res, err := h.OpenAPI.Import(c.Request.Context(), catalog.OpenAPIImportRequest{
		Document: doc, URL: req.URL, BaseURL: req.BaseURL, Prefix: req.Prefix,
		Tags: req.Tags, Operations: req.Operations, DryRun: req.DryRun, Update: req.Update,
	}, CurrentPrincipal(c))
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if req.DryRun || len(res.Registered)+len(res.Updated) == 0 {
		status = http.StatusOK // a dry run, or an update that changed nothing
	}
	c.JSON(status, res)
	return nil
}
