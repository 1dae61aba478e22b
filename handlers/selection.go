package handlers

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"toolbelt/models"
	"toolbelt/services/selection"
)

// FeedbackRequest names the tools a selected task actually used.
type FeedbackRequest struct {
	Tools []string `json:"tools"`
}

// FeedbackResult says which tools learned the selection's query.
type FeedbackResult struct {
	SelectionID string   `json:"selection_id" example:"9f2c4e1a7b3d5f60"`
	Learned     []string `json:"learned"`
}

// LearnedQueryList is what a tool was learned from.
type LearnedQueryList struct {
	Tool    string                `json:"tool" example:"file_read"`
	Queries []models.LearnedQuery `json:"queries"`
}

// SelectTools answers which tools fit a task.
//
//	@Summary		Select tools for a task
//	@ID			selectTools
//	@Description	Ranks the catalog for the task (dense similarity fused with BM25 and what was learned from usage), keeps what the caller may use and this host can run, and returns the best tools in the requested LLM format with scores, reasons and a token estimate. The selection id can be sent back as feedback; a later call in the same session also teaches the index.
//	@Tags			selection
//	@Accept			json
//	@Produce		json
//	@Param			request	body		selection.SelectRequest	true	"Task and filters (limit default 12, at most 40; format default openai)"
//	@Success		200		{object}	selection.SelectResult
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		422		{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/tools/select [post]
func (h *Handler) SelectTools(c *gin.Context) error {
	var req selection.SelectRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	res, err := h.Selector.Select(c.Request.Context(), CurrentPrincipal(c), req)
	if err != nil {
		return err
	}
	// The selection id is handed out only once its record is committed.
	if err := h.Selector.Committed(c.Request.Context(), res); err != nil {
		return fmt.Errorf("record selection: %w", err)
	}
	c.JSON(http.StatusOK, res)
	return nil
}

// SelectionFeedback teaches the index which tools a selected task used.
//
//	@Summary		Feedback on a selection
//	@ID			selectionFeedback
//	@Description	The selection's query becomes retrieval text for each named tool (whether or not it was among those selected), so similar tasks find it. Agents may only give feedback on their own selections.
//	@Tags			selection
//	@Accept			json
//	@Produce		json
//	@Param			id		path		string			true	"Selection id"
//	@Param			request	body		FeedbackRequest	true	"Tools the task used"
//	@Success		200		{object}	FeedbackResult
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Failure		422		{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/selections/{id}/feedback [post]
func (h *Handler) SelectionFeedback(c *gin.Context) error {
	var req FeedbackRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	learned, err := h.Selector.Feedback(c.Request.Context(), CurrentPrincipal(c), c.Param("id"), req.Tools)
	if err != nil {
		return err
	}
	if learned == nil {
		learned = []string{}
	}
	c.JSON(http.StatusOK, FeedbackResult{SelectionID: c.Param("id"), Learned: learned})
	return nil
}

// LearnedQueries lists what a tool was learned from.
//
//	@Summary		Learned queries of a tool
//	@ID			learnedQueries
//	@Description	The task texts that led to this tool being used, newest first; they are part of its retrieval text.
//	@Tags			selection
//	@Produce		json
//	@Param			name	path		string	true	"Tool name"
//	@Success		200		{object}	LearnedQueryList
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/tools/{name}/queries [get]
func (h *Handler) LearnedQueries(c *gin.Context) error {
	qs, err := h.Selector.LearnedQueries(c.Request.Context(), c.Param("name"))
	if err != nil {
		return err
	}
	if qs == nil {
		qs = []models.LearnedQuery{}
	}
	c.JSON(http.StatusOK, LearnedQueryList{Tool: c.Param("name"), Queries: qs})
	return nil
}

// ForgetQuery removes a learned query.
//
//	@Summary		Remove a learned query
//	@ID			forgetQuery
//	@Description	The query stops being retrieval text for the tool at once.
//	@Tags			selection
//	@Param			name	path	string	true	"Tool name"
//	@Param			id		path	int		true	"Learned query id"
//	@Success		204
//	@Failure		400	{object}	ErrorBody
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody
//	@Failure		404	{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/tools/{name}/queries/{id} [delete]
func (h *Handler) ForgetQuery(c *gin.Context) error {
	id, err := IDParam(c, "id")
	if err != nil {
		return err
	}
	if err := h.Selector.ForgetQuery(c.Request.Context(), c.Param("name"), id); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}
