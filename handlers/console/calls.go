package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"toolbelt/handlers"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/invoke"
	"toolbelt/views"
)

// callsPageSize is how many calls one history page lists.
const callsPageSize = 50

// callsMaxPage bounds offset pagination: a deeper page costs a pass over
// every call it skips, so older calls are reached by moving Until instead
// (the last page links there).
const callsMaxPage = 200

// callStatuses are the states the history filter offers, in that order.
var callStatuses = []string{models.StatusSucceeded, models.StatusFailed, models.StatusRefused,
	models.StatusAwaitingApproval, models.StatusQueued, models.StatusRunning, models.StatusInterrupted}

// filterTimeLayouts are what a datetime-local input sends (minutes, or
// seconds with step="1"); RFC 3339 is accepted too for hand-made links.
var filterTimeLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339}

// CallsPage lists the call history, filtered and paginated; an agent sees
// only its own calls (the service enforces it). An invalid filter is
// answered 400 with its error beside the field and no list.
func (h *Handler) CallsPage(c *gin.Context) error {
	ctx := c.Request.Context()
	me := handlers.CurrentPrincipal(c)
	ps, err := h.Accounts.Principals(ctx)
	if err != nil {
		return err
	}
	names := callerNamesOf(ps)
	d := views.CallsData{Statuses: callStatuses, Errors: map[string]string{}}
	form := views.CallFilterForm{Tool: strings.TrimSpace(c.Query("tool")), Status: c.Query("status"),
		Principal: strings.TrimSpace(c.Query("principal")), Session: strings.TrimSpace(c.Query("session")),
		Since: strings.TrimSpace(c.Query("since")), Until: strings.TrimSpace(c.Query("until")), Sort: c.Query("sort")}
	f := models.CallFilter{Tool: form.Tool, Status: form.Status, SessionID: form.Session, Sort: form.Sort, Limit: callsPageSize}
	if _, ok := models.CallSorts[form.Sort]; form.Sort != "" && !ok {
		d.Errors["sort"] = fmt.Sprintf("The history cannot be ordered by %q; choose a column's header.", form.Sort)
	}
	if len(form.Tool) > 64 {
		d.Errors["tool"] = "A tool name is at most 64 characters."
	}
	if form.Status != "" && !slices.Contains(callStatuses, form.Status) {
		d.Errors["status"] = fmt.Sprintf("%q is not a call status; choose one from the list.", form.Status)
	}
	if len(form.Session) > 128 {
		d.Errors["session"] = "A session id is at most 128 characters."
	}
	if me == nil || me.Role != access.RoleAgent {
		for _, p := range ps {
			d.Principals = append(d.Principals, views.PrincipalOption{Value: strconv.FormatUint(uint64(p.ID), 10), Label: p.Name + " (" + p.Role + ")"})
		}
		if form.Principal != "" {
			id, err := strconv.ParseUint(form.Principal, 10, 32)
			if _, known := names[uint(id)]; err != nil || !known {
				d.Errors["principal"] = fmt.Sprintf("No principal has the id %q; choose one from the list.", form.Principal)
			}
			f.PrincipalID = uint(id)
		}
	} else {
		form.Principal = "" // the service shows an agent its own calls only
	}
	for _, tf := range []struct {
		name string
		raw  *string
		dst  *time.Time
	}{{"since", &form.Since, &f.Since}, {"until", &form.Until, &f.Until}} {
		if *tf.raw == "" {
			continue
		}
		t, ok := parseFilterTime(*tf.raw)
		if !ok {
			d.Errors[tf.name] = fmt.Sprintf("%q is not a date and time; use the picker or type it as 2026-01-31T14:05 (UTC).", *tf.raw)
			continue
		}
		*tf.dst, *tf.raw = t, filterTimeValue(t)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		d.Errors["until"] = "Must be later than the From time."
	}
	d.Page = 1
	if v := c.Query("page"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 1:
			d.Errors["page"] = fmt.Sprintf("Page %q does not exist; pages are numbered from 1.", v)
		case n > callsMaxPage:
			d.Errors["page"] = fmt.Sprintf("Pages stop at %d (the newest %d matching calls); set Until to an earlier time to see older calls.",
				callsMaxPage, callsMaxPage*callsPageSize)
		default:
			d.Page = n
		}
	}
	d.Filter = form
	d.Filtered = form != views.CallFilterForm{Sort: form.Sort}
	d.Sorting = views.Sorting{By: form.Sort, Default: "-time", URL: func(by string) string {
		g := form
		g.Sort = by
		return callsURL(g, 1)
	}}
	p := h.Page(c, "Call history")
	if len(d.Errors) > 0 {
		return h.Render(c, handlers.StatusFor(models.CodeInvalidRequest), views.Calls(p, d))
	}
	f.Offset = (d.Page - 1) * callsPageSize
	calls, total, err := h.Invoker.History(ctx, me, f)
	if err != nil {
		return err
	}
	d.Total = total
	d.Pages = max(1, int((total+callsPageSize-1)/callsPageSize))
	for _, rec := range calls {
		d.Calls = append(d.Calls, views.CallRow{ID: rec.ID, Tool: rec.Tool, Version: rec.Version, Status: rec.Status,
			ErrorCode: rec.ErrorCode, Principal: names.of(rec.PrincipalID), Session: rec.SessionID, Cached: rec.Cached,
			TotalMs: rec.TotalMs, CreatedAt: rec.CreatedAt})
	}
	if len(d.Calls) > 0 {
		d.From, d.To = f.Offset+1, f.Offset+len(d.Calls)
	}
	if d.Page > 1 {
		d.PrevURL = callsURL(form, min(d.Page-1, d.Pages))
	}
	switch {
	case d.Page < min(d.Pages, callsMaxPage):
		d.NextURL = callsURL(form, d.Page+1)
	case d.Page == callsMaxPage && d.Pages > callsMaxPage && len(calls) > 0 && d.Sorting.NewestFirst():
		older := form
		older.Until = filterTimeValue(olderCallsUntil(calls[len(calls)-1].CreatedAt, f.Until))
		d.NextURL = callsURL(older, 1)
	}
	return h.Render(c, http.StatusOK, views.Calls(p, d))
}

// CallPage shows one call: status, tool and version, who and which
// session, stage timings, attempts, cache, the delivery to its callback
// URL, the redacted arguments, and the result or the error with its
// suggestion.
func (h *Handler) CallPage(c *gin.Context) error {
	ctx := c.Request.Context()
	me := handlers.CurrentPrincipal(c)
	rec, err := h.Invoker.CallRecord(ctx, me, c.Param("id"))
	if err != nil {
		return err
	}
	names, err := h.callerNames(ctx)
	if err != nil {
		return err
	}
	d := views.CallDetail{ID: rec.ID, Tool: rec.Tool, Version: rec.Version, Status: rec.Status,
		Principal: names.of(rec.PrincipalID), Session: rec.SessionID, QueueMs: rec.QueueMs, RunMs: rec.RunMs,
		TotalMs: rec.TotalMs, CreatedAt: rec.CreatedAt, FinishedAt: rec.FinishedAt, Attempts: rec.Attempts,
		Cached: rec.Cached, Arguments: rec.Arguments, ActedAs: rec.ActedAs,
		Waiting:     rec.Status == models.StatusAwaitingApproval && me != nil && me.Role != access.RoleAgent,
		Staff:       me != nil && me.Role != access.RoleAgent,
		PrincipalID: strconv.FormatUint(uint64(rec.PrincipalID), 10)}
	if rec.Stages != "" {
		// Written by the invoker; a record it cannot read shows no stages.
		if err := json.Unmarshal([]byte(rec.Stages), &d.Stages); err != nil {
			d.Stages = nil
		}
	}
	if d.TotalMs == 0 && rec.FinishedAt != nil {
		// Ended before the chain timed it (denied, expired, cancelled
		// while waiting): its total is the time it took to end.
		d.TotalMs = rec.FinishedAt.Sub(rec.CreatedAt).Milliseconds()
	}
	if a, err := h.Invoker.Decision(ctx, rec.ID); err != nil {
		return err
	} else if a != nil {
		dec := &views.CallDecision{ID: a.ID, Status: a.Status, Reason: a.Reason, At: a.DecidedAt}
		if a.DecidedBy != nil {
			dec.By = decider(names, *a)
		}
		end := time.Now()
		switch {
		case a.DecidedAt != nil:
			end = *a.DecidedAt
		case a.Status == models.ApprovalExpired:
			end = a.ExpiresAt
		}
		dec.WaitMs = max(end.Sub(a.CreatedAt).Milliseconds(), 0)
		d.Decision = dec
		d.Stages = withApprovalWait(d.Stages, dec.WaitMs)
	}
	cbs, err := h.Invoker.Callbacks(ctx, rec.ID)
	if err != nil {
		return err
	}
	if cb := cbs[rec.ID]; cb != nil {
		d.Callback = &views.CallCallback{URL: cb.URL, State: cb.State, Attempts: cb.Attempts, LastStatus: cb.LastStatus,
			LastError: cb.LastError, NextAt: cb.NextAt, DeliveredAt: cb.DeliveredAt}
	}
	var res invoke.ToolResult
	if rec.Result != "" && json.Unmarshal([]byte(rec.Result), &res) == nil {
		if len(res.Data) > 0 && string(res.Data) != "null" {
			d.Data = string(res.Data)
		}
		if e := res.Error; e != nil && rec.Status != models.StatusAwaitingApproval {
			ce := &views.CallError{Code: e.Code, Message: e.Message, Suggestion: e.Suggestion, Retryable: e.Retryable}
			for _, p := range e.Problems {
				ce.Problems = append(ce.Problems, strings.TrimSpace(p.Pointer+" "+p.Message))
			}
			d.Error = ce
		}
	}
	return h.Render(c, http.StatusOK, views.Call(h.Page(c, rec.Tool+" call"), d))
}

// olderCallsUntil is the Until that continues the history after a call created
// at last: its second rounded up, so no call is skipped (a few of that
// second show again), unless that would not move before until.
func olderCallsUntil(last, until time.Time) time.Time {
	t := last.UTC().Truncate(time.Second)
	if t.Before(last) {
		t = t.Add(time.Second)
	}
	if !until.IsZero() && !t.Before(until) {
		t = last.UTC().Truncate(time.Second)
	}
	return t
}

// parseFilterTime reads a datetime-local value (no zone: UTC) or an
// RFC 3339 time.
func parseFilterTime(v string) (time.Time, bool) {
	for _, layout := range filterTimeLayouts {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// filterTimeValue is t as a datetime-local input shows it (to the
// millisecond, the finest it takes).
func filterTimeValue(t time.Time) string {
	switch {
	case t.Nanosecond() != 0:
		return t.Format("2006-01-02T15:04:05.999")
	case t.Second() != 0:
		return t.Format("2006-01-02T15:04:05")
	}
	return t.Format("2006-01-02T15:04")
}

// callsURL is the history page number page under the same filters.
func callsURL(f views.CallFilterForm, page int) string {
	q := url.Values{}
	for k, v := range map[string]string{"tool": f.Tool, "status": f.Status, "principal": f.Principal,
		"session": f.Session, "since": f.Since, "until": f.Until, "sort": f.Sort} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if page > 1 {
		q.Set("page", strconv.Itoa(page))
	}
	if len(q) == 0 {
		return "/admin/calls"
	}
	return "/admin/calls?" + q.Encode()
}

// withApprovalWait puts the wait for a reviewer among a call's stages,
// before the approve guard of the run it resumed (the stages are of that
// run: the first one, which asked, ended when the call was parked).
func withApprovalWait(stages []views.CallStage, waitMs int64) []views.CallStage {
	if len(stages) == 0 {
		return stages
	}
	wait := views.CallStage{Stage: "waiting for approval", Us: waitMs * 1000}
	for i, s := range stages {
		if s.Stage == "approve" {
			return slices.Insert(stages, i, wait)
		}
	}
	return stages
}
