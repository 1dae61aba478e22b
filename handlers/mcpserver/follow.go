package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
	"toolbelt/services/invoke"
)

// A client that sends a progressToken with a tools/call says it can follow
// a long request, so a call that did not end at once (it waits for a
// reviewer's approval, or for a slot in its queue) is held open for it:
// each change of the call is a notifications/progress, and the answer is
// how the call ended. A client without a token is answered at once, as
// before, and reads the outcome later with call_result.
const (
	// FollowFor bounds the wait: after it the call is answered as it
	// stands (waiting), and call_result reads the rest.
	FollowFor = 10 * time.Minute
	// cancelWithin bounds the store's work of cancelling a call whose
	// client gave up, so a stuck database cannot hold the handler (and a
	// shutdown waiting for it) for ever.
	cancelWithin = 10 * time.Second
	// ProgressEvery is how often a call that has not changed says it still
	// waits, so that a client resetting its timeout on progress does not
	// give up on a reviewer who takes a while.
	ProgressEvery = 15 * time.Second
)

// follow holds a call that has not ended for a client that asked for
// progress (token), notifying each change, and returns its outcome, or res
// unchanged when the wait ends first (FollowFor passes, or the server
// shuts down). A client that cancels the request cancels the call.
func (s *Server) follow(ctx context.Context, p *models.Principal, ss *mcp.ServerSession, token any, res invoke.ToolResult) invoke.ToolResult {
	s.following.Add(1)
	defer s.following.Done()
	rec, events, stop, err := s.invoker.Events(ctx, p, res.CallID)
	if err != nil {
		s.log.ErrorContext(ctx, "mcp follow call", "call_id", res.CallID, "err", err)
		return res
	}
	defer stop()
	var progress float64
	notify := func(status, message string, last bool) {
		progress++
		params := &mcp.ProgressNotificationParams{ProgressToken: token, Progress: progress, Message: message,
			Meta: mcp.Meta{"toolbelt/call_id": res.CallID, "toolbelt/status": status}}
		if id := approvalID(res); id != "" {
			params.Meta["toolbelt/approval_id"] = id
		}
		if last {
			params.Total = progress
		}
		if err := ss.NotifyProgress(ctx, params); err != nil {
			s.log.DebugContext(ctx, "mcp progress not sent", "call_id", res.CallID, "err", err)
		}
	}
	// Events subscribed before reading the record: a call that ended in
	// between is read here, one that ends later is an event.
	if models.Terminal(rec.Status) {
		return s.ended(ctx, rec, notify)
	}
	status := rec.Status
	notify(status, progressMessage(res.CallID, status), false)
	limit := time.NewTimer(s.followFor)
	defer limit.Stop()
	beat := time.NewTicker(s.progressEvery)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return s.cancelled(ctx, p, res)
		case <-s.closing:
			return res
		case <-limit.C:
			return res
		case <-beat.C:
			notify(status, progressMessage(res.CallID, status), false)
		case ev := <-events:
			switch ev.Name {
			case "status":
				var st struct {
					Status string `json:"status"`
				}
				if json.Unmarshal(ev.Data, &st) == nil && st.Status != status && !models.Terminal(st.Status) {
					status = st.Status
					notify(status, progressMessage(res.CallID, status), false)
				}
			case "result":
				var end invoke.ToolResult
				if err := json.Unmarshal(ev.Data, &end); err != nil || end.CallID == "" {
					rec, err := s.invoker.CallRecord(ctx, p, res.CallID)
					if err != nil {
						return res
					}
					return s.ended(ctx, rec, notify)
				}
				notify(end.Status, progressMessage(end.CallID, end.Status), true)
				return end
			}
		}
	}
}

// cancelled ends a followed call whose client gave up on it: the client
// cancelled the request (notifications/cancelled, or its own timeout), or
// closed the session or the connection. The call is over for the agent,
// so it must not run when a reviewer approves it later; it is recorded as
// cancelled, and a call that ended meanwhile keeps its outcome.
func (s *Server) cancelled(ctx context.Context, p *models.Principal, res invoke.ToolResult) invoke.ToolResult {
	ctx, stop := context.WithTimeout(context.WithoutCancel(ctx), cancelWithin)
	defer stop()
	if err := s.invoker.Cancel(ctx, p, res.CallID); err != nil && models.CodeOf(err) != models.CodeConflict {
		s.log.ErrorContext(ctx, "mcp cancel call", "call_id", res.CallID, "err", err)
	}
	rec, err := s.invoker.CallRecord(ctx, p, res.CallID)
	if err != nil || !models.Terminal(rec.Status) {
		return res
	}
	end, _ := storedResult(rec)
	return end
}

// storedResult is the result a call's record holds, or, when the record
// holds none that reads (a result too large to keep whole, say), its id
// and status with the decoding error.
func storedResult(rec *models.Call) (invoke.ToolResult, error) {
	var res invoke.ToolResult
	if err := json.Unmarshal([]byte(rec.Result), &res); err != nil || res.CallID == "" {
		if err == nil {
			err = errors.New("the stored result names no call")
		}
		return invoke.ToolResult{CallID: rec.ID, Status: rec.Status}, err
	}
	return res, nil
}

// ended is the outcome of a call whose record says it ended, its last
// progress said.
func (s *Server) ended(ctx context.Context, rec *models.Call, notify func(status, message string, last bool)) invoke.ToolResult {
	end, err := storedResult(rec)
	if err != nil {
		s.log.ErrorContext(ctx, "mcp follow: stored result", "call_id", rec.ID, "err", err)
	}
	notify(end.Status, progressMessage(rec.ID, end.Status), true)
	return end
}

// progressMessage says where a call stands, for a person watching.
func progressMessage(callID, status string) string {
	switch status {
	case models.StatusAwaitingApproval:
		return fmt.Sprintf("The call %s waits for a human reviewer to approve it.", callID)
	case models.StatusQueued:
		return fmt.Sprintf("The call %s waits for a free slot in its queue.", callID)
	case models.StatusRunning:
		return fmt.Sprintf("The call %s is running.", callID)
	}
	return fmt.Sprintf("The call %s ended: %s.", callID, status)
}

// approvalID is the id of the approval a parked call waits for, if any.
func approvalID(res invoke.ToolResult) string {
	var parked struct {
		ApprovalID string `json:"approval_id"`
	}
	if json.Unmarshal(res.Data, &parked) != nil {
		return ""
	}
	return parked.ApprovalID
}
