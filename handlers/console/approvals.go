package console

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"toolbelt/handlers"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/views"
)

// decidedShown caps the decided approvals listed under the queue.
const decidedShown = 50

// decisionFailure is a decision the console could not record, shown on the
// approval it was about.
type decisionFailure struct {
	id, reason  string
	reasonError string // the reason field's problem
	message     string // any other refusal
}

// ApprovalsPage shows the pending queue, refreshing itself, with a form
// per call to approve or deny it, and the recent decisions below.
func (h *Handler) ApprovalsPage(c *gin.Context) error {
	d, err := h.approvalsData(c, nil, true)
	if err != nil {
		return err
	}
	return h.Render(c, http.StatusOK, views.Approvals(h.Page(c, "Approvals"), d))
}

// PendingApprovals is the queue alone, the fragment the page polls.
func (h *Handler) PendingApprovals(c *gin.Context) error {
	d, err := h.approvalsData(c, nil, false)
	if err != nil {
		return err
	}
	return h.Render(c, http.StatusOK, views.PendingApprovals(d))
}

// ApproveInConsole approves a pending call, which then runs.
func (h *Handler) ApproveInConsole(c *gin.Context) error { return h.decideInConsole(c, true) }

// DenyInConsole denies a pending call with the reason the agent will read.
func (h *Handler) DenyInConsole(c *gin.Context) error { return h.decideInConsole(c, false) }

// decideInConsole records a decision through the same service as the API
// (so a reviewer cannot decide their own call). A refusal re-renders the
// queue with the error on that approval and the typed reason kept.
func (h *Handler) decideInConsole(c *gin.Context, approve bool) error {
	id, reason := c.Param("id"), c.PostForm("reason")
	a, err := h.Invoker.Decide(c.Request.Context(), handlers.CurrentPrincipal(c), id, approve, reason)
	if err == nil {
		verb := "Denied"
		if approve {
			verb = "Approved"
		}
		notice := verb + " the " + a.Tool + " call " + a.CallID + "."
		if approve {
			notice += " It runs now; its result will be in the call history."
		}
		return Redirect(c, "/admin/approvals", notice)
	}
	status, body := handlers.Classify(c, h.Log, err)
	if status >= http.StatusInternalServerError {
		return err
	}
	f := &decisionFailure{id: id, reason: reason, message: personMessage(err) + "."}
	var ve *models.ValidationError
	if errors.As(err, &ve) {
		f.message = ""
		for _, p := range ve.Problems {
			if p.Pointer == "/reason" {
				f.reasonError = "The reason " + p.Message + "."
			}
		}
		if f.reasonError == "" {
			f.message = body.Error.Message
		}
	}
	d, derr := h.approvalsData(c, f, true)
	if derr != nil {
		return derr
	}
	return h.Render(c, status, views.Approvals(h.Page(c, "Approvals"), d))
}

// personMessage is an error's message for a person on a console page:
// what it says beyond its kind and context (models.Detail), with a
// capital letter and without a closing period, which the sentence it
// goes into adds ("Not added: " + personMessage(err) + ".").
func personMessage(err error) string {
	msg := strings.TrimRight(strings.TrimSpace(models.Detail(err)), ".")
	if msg != "" {
		msg = strings.ToUpper(msg[:1]) + msg[1:]
	}
	return msg
}

// approvalsData gathers the queue (oldest, so soonest to expire, first),
// with a failed decision placed on its approval, and the latest decisions
// when decided is set (the polled fragment does without them).
func (h *Handler) approvalsData(c *gin.Context, fail *decisionFailure, decided bool) (views.ApprovalsData, error) {
	ctx := c.Request.Context()
	me := handlers.CurrentPrincipal(c)
	d := views.ApprovalsData{Now: time.Now().UTC(), Poll: fail == nil}
	if s := CurrentConsole(c); s != nil {
		d.CSRF = s.CSRF
	}
	pending, err := h.Invoker.Approvals(ctx, models.ApprovalPending)
	if err != nil {
		return d, err
	}
	// Every decision: the page lists the latest, and each pending call
	// shows the latest on its tool.
	all, err := h.Invoker.Approvals(ctx, "all")
	if err != nil {
		return d, err
	}
	names, err := h.callerNames(ctx)
	if err != nil {
		return d, err
	}
	// A decision is shown on each waiting call of its tool and in the
	// list: its row (and its call's outcome) is read once.
	rows := map[string]views.DecidedApproval{}
	decidedRow := func(a models.Approval) views.DecidedApproval {
		row, ok := rows[a.ID]
		if !ok {
			row = h.decided(ctx, me, names, a)
			rows[a.ID] = row
		}
		return row
	}
	placed := false
	for _, a := range slices.Backward(pending) {
		row := views.PendingApproval{ID: a.ID, CallID: a.CallID, Tool: a.Tool, Version: a.Version,
			Requester: names.of(a.PrincipalID), Arguments: a.Arguments, CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt,
			Own: me != nil && a.PrincipalID == me.ID}
		if fail != nil && fail.id == a.ID {
			row.Reason, row.ReasonError, row.Error, placed = fail.reason, fail.reasonError, fail.message, true
		}
		if r, err := h.Invoker.ReviewOf(ctx, &a); err != nil {
			h.Log.WarnContext(ctx, "review of a pending call", "err", err, "approval_id", a.ID)
		} else {
			row.Level, row.Why, row.Description, row.Session, row.Task = r.Level, r.Why, r.Description, r.SessionID, r.Task
			for _, f := range r.Findings {
				row.Findings = append(row.Findings, views.Finding{Argument: f.Argument, What: f.What})
			}
			if r.Refusal != nil {
				row.Refusal = &views.Refusal{Code: r.Refusal.Code, Message: r.Refusal.Message}
			}
		}
		for _, other := range all {
			if other.Tool == a.Tool && other.Status != models.ApprovalPending && len(row.Recent) < recentShown {
				row.Recent = append(row.Recent, decidedRow(other))
			}
		}
		d.Pending = append(d.Pending, row)
	}
	if fail != nil && !placed {
		d.Error = fail.message
		if d.Error == "" {
			d.Error = fail.reasonError
		}
	}
	for _, a := range all {
		if !decided {
			break
		}
		if a.Status == models.ApprovalPending {
			continue
		}
		if len(d.Decided) == decidedShown {
			d.DecidedCapped = true
			break
		}
		d.Decided = append(d.Decided, decidedRow(a))
	}
	return d, nil
}

// recentShown caps the decisions on its tool a pending call shows.
const recentShown = 3

// decided is a decided approval as the page shows it.
func (h *Handler) decided(ctx context.Context, me *models.Principal, names callerNames, a models.Approval) views.DecidedApproval {
	row := views.DecidedApproval{ID: a.ID, CallID: a.CallID, Tool: a.Tool, Requester: names.of(a.PrincipalID),
		Status: a.Status, Reason: a.Reason, DecidedBy: "—", When: a.ExpiresAt}
	if a.DecidedBy != nil {
		row.DecidedBy = decider(names, a)
	}
	if a.DecidedAt != nil {
		row.When = *a.DecidedAt
	}
	if a.Status == models.ApprovalUsed {
		// What the run came to: approved calls can still be refused by
		// the checks after approval, or fail.
		if rec, err := h.Invoker.CallRecord(ctx, me, a.CallID); err == nil {
			row.Outcome, row.OutcomeCode = rec.Status, rec.ErrorCode
		}
	}
	return row
}

// decider names who decided a: the principal, and the person when the
// identity provider signed them in.
func decider(names callerNames, a models.Approval) string {
	by := names.of(*a.DecidedBy)
	if a.DeciderName != "" {
		by += " (" + a.DeciderName + ")"
	}
	return by
}

// callerNames maps principal ids to names for display.
type callerNames map[uint]string

func (n callerNames) of(id uint) string {
	if name, ok := n[id]; ok {
		return name
	}
	if id == 0 {
		return "—"
	}
	return "principal " + strconv.FormatUint(uint64(id), 10)
}

// callerNames reads every principal's name (accounts are few).
func (h *Handler) callerNames(ctx context.Context) (callerNames, error) {
	ps, err := h.Accounts.Principals(ctx)
	if err != nil {
		return nil, err
	}
	return callerNamesOf(ps), nil
}

func callerNamesOf(ps []access.Principal) callerNames {
	out := make(callerNames, len(ps))
	for _, p := range ps {
		out[p.ID] = p.Name
	}
	return out
}
