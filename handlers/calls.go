package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"toolbelt/models"
	"toolbelt/services/invoke"
)

// CallRecord is one call of the history with its result.
type CallRecord struct {
	models.Call
	Result StoredResult `json:"result"`
	// Stages are the chain's steps as the call ran them: each guard's own
	// time, the execution, each attempt and the code it failed with
	// (absent for a call that has not ended).
	Stages StoredStages `json:"stages,omitempty"`
	// Callback is the delivery of the result to the call's callback_url
	// (absent when it named none, or was answered at once).
	Callback *models.Callback `json:"callback,omitempty"`
}

// StoredStages is a call's stored stages, written out as they are; the
// API document describes them as a StageList.
type StoredStages json.RawMessage

// MarshalJSON writes the stored stages as they are.
func (s StoredStages) MarshalJSON() ([]byte, error) {
	if len(s) == 0 {
		return []byte("null"), nil
	}
	return s, nil
}

// StageList is what StoredStages holds, for the API document.
type StageList []Stage

// Stage is one step of a call as the chain ran it.
type Stage struct {
	// Stage is a guard's name (resolve, validate, authorize, approve,
	// secure, cache, limit, queue), execute, or attempt.
	Stage string `json:"stage" example:"queue"`
	// Us is the time in microseconds: a guard's own (the queue's includes
	// its wait for a slot), the execution's with the backoff between
	// attempts, or one attempt's.
	Us int64 `json:"us" example:"1250"`
	// N numbers an attempt from 1.
	N int `json:"n,omitempty" example:"1"`
	// Error is the code an attempt failed with.
	Error string `json:"error,omitempty" example:"TIMEOUT"`
}

// StoredResult is the ToolResult a call ended with, as the history stored
// it, written out without being decoded again; null while the call runs.
// The API document describes it as the invoke.ToolResult it is (.swaggo
// tells swag), so clients read a polled call's result typed.
type StoredResult json.RawMessage

// MarshalJSON writes the stored result as it is.
func (r StoredResult) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	return r, nil
}

// CallList is one page of the call history.
type CallList struct {
	Calls  []CallRecord `json:"calls"`
	Total  int64        `json:"total" example:"42"`
	Limit  int          `json:"limit" example:"50"`
	Offset int          `json:"offset" example:"0"`
}

// StatusOf is the HTTP status of a call result: 202 while it waits for a
// reviewer or a worker, the status of its code (httpStatus) when a guard
// refused it, and 200 when the tool ran, even if it failed: the agent
// feeds the result to its LLM.
func StatusOf(res invoke.ToolResult) int {
	if res.Status == models.StatusAwaitingApproval || res.Status == models.StatusQueued {
		return http.StatusAccepted
	}
	if res.Status == models.StatusUnrecorded {
		// Ran, but not kept: never a 2xx, though the body has the
		// result (and says not to call again).
		return http.StatusServiceUnavailable
	}
	if res.Status != models.StatusRefused || res.Error == nil {
		return http.StatusOK
	}
	return StatusFor(res.Error.Code)
}

// CallTool runs a tool call through the guard chain.
//
//	@Summary		Call a tool
//	@ID			callTool
//	@Description	Runs the call through the guards (resolve, validate, authorize, approve, secure, cache, rate limit, category queue) and the tool, retrying retryable failures with backoff. A dangerous or confirm-required call waits for a reviewer, and an async call runs in the background: both answer 202 with a Location to poll, and with a callback_url their ToolResult is POSTed there, signed, when they end. A callback_url that is not an absolute http(s) URL the egress policy allows answers 400 before anything is stored. A call that ran answers 200 with its ToolResult even when the tool failed; a call a guard refused answers 4xx with the same body (404 unknown tool with suggestions, 422 invalid arguments, 403 permission, approval or path).
//	@Tags			calls
//	@Accept			json
//	@Produce		json
//	@Param			request	body		invoke.CallRequest	true	"Tool, arguments and session"
//	@Success		200		{object}	invoke.ToolResult
//	@Success		202		{object}	invoke.ToolResult	"waiting for approval, or async: poll the Location"
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	invoke.ToolResult
//	@Failure		404		{object}	invoke.ToolResult
//	@Failure		422		{object}	invoke.ToolResult
//	@Failure		429		{object}	invoke.ToolResult	"rate limit or full queue, with Retry-After"
//	@Failure		503		{object}	invoke.ToolResult	"status unrecorded, code NOT_RECORDED: the tool ran (its result is in data) but the call could not be recorded; do not call again"
//	@Security		BearerAuth
//	@Router			/api/v1/calls [post]
func (h *Handler) CallTool(c *gin.Context) error {
	var req invoke.CallRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	res, err := h.Invoker.CallAcknowledged(c.Request.Context(), CurrentPrincipal(c), req)
	if err != nil {
		return err
	}
	if res.Error != nil && res.Error.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(res.Error.RetryAfter))
	}
	if StatusOf(res) == http.StatusAccepted {
		c.Header("Location", "/api/v1/calls/"+res.CallID)
	}
	c.Data(StatusOf(res), "application/json; charset=utf-8", res.JSON())
	return nil
}

// GetCall returns one call of the history.
//
//	@Summary		Get a call
//	@ID			getCall
//	@Description	One call with its result, and the delivery of that result to its callback_url when it named one (state, attempts, last status and error, next attempt, delivery time). Agents see only their own calls.
//	@Tags			calls
//	@Produce		json
//	@Param			id	path		string	true	"Call id"
//	@Success		200	{object}	CallRecord
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody
//	@Failure		404	{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/calls/{id} [get]
func (h *Handler) GetCall(c *gin.Context) error {
	rec, err := h.Invoker.CallRecord(c.Request.Context(), CurrentPrincipal(c), c.Param("id"))
	if err != nil {
		return err
	}
	out := []CallRecord{{Call: *rec, Result: StoredResult(rec.Result), Stages: StoredStages(rec.Stages)}}
	if err := h.withCallbacks(c, out); err != nil {
		return err
	}
	c.JSON(http.StatusOK, out[0])
	return nil
}

// ListCalls returns the call history.
//
//	@Summary		Call history
//	@ID			listCalls
//	@Description	Calls newest first, filtered and paginated. Agents see only their own calls.
//	@Tags			calls
//	@Produce		json
//	@Param			tool		query		string	false	"Tool name"
//	@Param			status		query		string	false	"Status"	Enums(succeeded, failed, refused)
//	@Param			principal	query		int		false	"Principal id"
//	@Param			session_id	query		string	false	"Session"
//	@Param			since		query		string	false	"RFC 3339 time, inclusive"
//	@Param			until		query		string	false	"RFC 3339 time, exclusive"
//	@Param			limit		query		int		false	"Page size (default 50, at most 1000)"
//	@Param			offset		query		int		false	"Entries to skip"
//	@Success		200			{object}	CallList
//	@Failure		400			{object}	ErrorBody
//	@Failure		401			{object}	ErrorBody
//	@Failure		403			{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/calls [get]
func (h *Handler) ListCalls(c *gin.Context) error {
	if err := OnlyQuery(c, "tool", "status", "principal", "session_id", "since", "until", "limit", "offset"); err != nil {
		return err
	}
	f := models.CallFilter{Tool: c.Query("tool"), Status: c.Query("status"), SessionID: c.Query("session_id"), Limit: 50}
	var err error
	if c.Query("limit") != "" {
		if f.Limit, err = IntQuery(c, "limit"); err != nil {
			return err
		}
	}
	if f.Offset, err = IntQuery(c, "offset"); err != nil {
		return err
	}
	p, err := IntQuery(c, "principal")
	if err != nil {
		return err
	}
	f.PrincipalID = uint(max(p, 0))
	for name, dst := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := c.Query(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return models.ErrInvalid.Errorf("%s=%q is not an RFC 3339 time", name, v)
			}
			*dst = t
		}
	}
	calls, total, err := h.Invoker.History(c.Request.Context(), CurrentPrincipal(c), f)
	if err != nil {
		return err
	}
	out := CallList{Calls: make([]CallRecord, len(calls)), Total: total, Limit: f.Limit, Offset: f.Offset}
	for i, rec := range calls {
		out.Calls[i] = CallRecord{Call: rec, Result: StoredResult(rec.Result), Stages: StoredStages(rec.Stages)}
	}
	if err := h.withCallbacks(c, out.Calls); err != nil {
		return err
	}
	c.JSON(http.StatusOK, out)
	return nil
}

// DecisionRequest carries a reviewer's reason.
type DecisionRequest struct {
	Reason string `json:"reason" example:"the command only lists files"`
}

// ApprovalList lists approvals.
type ApprovalList struct {
	Approvals []models.Approval `json:"approvals"`
}

// ListApprovals lists approvals.
//
//	@Summary		Approval queue
//	@ID			listApprovals
//	@Description	Pending approvals by default (tool, redacted arguments, requester, expiry), newest first; status=all or a state for the others.
//	@Tags			approvals
//	@Produce		json
//	@Param			status	query		string	false	"State"	Enums(pending, approved, denied, expired, used, all)
//	@Success		200		{object}	ApprovalList
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/approvals [get]
func (h *Handler) ListApprovals(c *gin.Context) error {
	if err := OnlyQuery(c, "status"); err != nil {
		return err
	}
	as, err := h.Invoker.Approvals(c.Request.Context(), c.Query("status"))
	if err != nil {
		return err
	}
	if as == nil {
		as = []models.Approval{}
	}
	c.JSON(http.StatusOK, ApprovalList{Approvals: as})
	return nil
}

// Approve approves a pending call, which then runs.
//
//	@Summary		Approve a call
//	@ID			approve
//	@Description	The call runs at once in the background (its result at GET /calls/{id}). A reviewer cannot approve their own call; an expired or decided approval answers 409.
//	@Tags			approvals
//	@Accept			json
//	@Produce		json
//	@Param			id		path		string			true	"Approval id"
//	@Param			request	body		DecisionRequest	false	"Reason"
//	@Success		200		{object}	models.Approval
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Failure		409		{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/approvals/{id}/approve [post]
func (h *Handler) Approve(c *gin.Context) error { return h.decide(c, true) }

// Deny denies a pending call with a reason for the agent.
//
//	@Summary		Deny a call
//	@ID			deny
//	@Description	The call ends with CONFIRMATION_DENIED and the reason as its suggestion.
//	@Tags			approvals
//	@Accept			json
//	@Produce		json
//	@Param			id		path		string			true	"Approval id"
//	@Param			request	body		DecisionRequest	true	"Reason (required)"
//	@Success		200		{object}	models.Approval
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Failure		404		{object}	ErrorBody
//	@Failure		409		{object}	ErrorBody
//	@Failure		422		{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/approvals/{id}/deny [post]
func (h *Handler) Deny(c *gin.Context) error { return h.decide(c, false) }

func (h *Handler) decide(c *gin.Context, approve bool) error {
	var req DecisionRequest
	if c.Request.ContentLength != 0 {
		if err := bindJSON(c, &req); err != nil {
			return err
		}
	}
	a, err := h.Invoker.Decide(c.Request.Context(), CurrentPrincipal(c), c.Param("id"), approve, req.Reason)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, a)
	return nil
}

// CancelCall cancels a call.
//
//	@Summary		Cancel a call
//	@ID			cancelCall
//	@Description	A queued or running call is cancelled (it ends CANCELLED); a call awaiting approval ends at once. Agents cancel only their own calls; a finished call answers 409.
//	@Tags			calls
//	@Param			id	path	string	true	"Call id"
//	@Success		202
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody
//	@Failure		404	{object}	ErrorBody
//	@Failure		409	{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/calls/{id} [delete]
func (h *Handler) CancelCall(c *gin.Context) error {
	if err := h.Invoker.Cancel(c.Request.Context(), CurrentPrincipal(c), c.Param("id")); err != nil {
		return err
	}
	c.Header("Location", "/api/v1/calls/"+c.Param("id"))
	c.Status(http.StatusAccepted)
	return nil
}

// CallEvents streams a call's events as Server-Sent Events.
//
//	@Summary		Call events (SSE)
//	@ID			callEvents
//	@Description	Streams the call's status changes, progress its tool emits, and finally its result ("result" event), as text/event-stream. A call that already ended sends its result at once. Agents see only their own calls.
//	@Tags			calls
//	@Produce		text/event-stream
//	@Param			id	path		string	true	"Call id"
//	@Success		200	{string}	string	"event stream"
//	@Failure		401	{object}	ErrorBody
//	@Failure		403	{object}	ErrorBody
//	@Failure		404	{object}	ErrorBody
//	@Failure		429	{object}	ErrorBody	"the caller holds its most event streams open"
//	@Security		BearerAuth
//	@Router			/api/v1/calls/{id}/events [get]
func (h *Handler) CallEvents(c *gin.Context) error {
	if h.EventStreams != nil {
		release, err := h.EventStreams.Take(CurrentPrincipal(c).ID, 0)
		if err != nil {
			return err
		}
		defer release()
	}
	rec, events, stop, err := h.Invoker.Events(c.Request.Context(), CurrentPrincipal(c), c.Param("id"))
	if err != nil {
		return err
	}
	defer stop()
	c.Header("Content-Type", "text/event-stream")
	c.Header("Cache-Control", "no-store")
	c.Header("X-Accel-Buffering", "no")
	c.Status(http.StatusOK)
	send := func(name string, data []byte) {
		fmt.Fprintf(c.Writer, "event: %s\ndata: %s\n\n", name, data)
		c.Writer.Flush()
	}
	status, _ := json.Marshal(map[string]string{"status": rec.Status})
	send("status", status)
	if models.Terminal(rec.Status) {
		send("result", []byte(rec.Result))
		return nil
	}
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		select {
		case <-c.Request.Context().Done():
			return nil
		case <-heartbeat.C:
			fmt.Fprint(c.Writer, ": keep-alive\n\n")
			c.Writer.Flush()
		case ev := <-events:
			send(ev.Name, ev.Data)
			if ev.Name == "result" {
				return nil
			}
		}
	}
}
