package console

import (
	"cmp"
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"

	"toolbelt/models"
	"toolbelt/services/ops"
	"toolbelt/views"
)

// approvalsPage is the review queue the pending count links to.
const approvalsPage = "/admin/approvals"

// Dashboard is the console's first page: the last 24 hours of calls, the
// busiest tools and those failing more than before, the catalog per
// category, the approvals waiting, and which embedder and sandbox run.
func (h *Handler) Dashboard(c *gin.Context) error {
	ctx := c.Request.Context()
	cats, err := h.Registry.Categories(ctx)
	if err != nil {
		return err
	}
	rng, ok := views.DashRangeOf(c.Query("range"))
	if !ok {
		return models.ErrInvalid.Errorf("range %q: use one of 1h, 24h, 7d", c.Query("range"))
	}
	sum, err := h.Stats.Summary(ctx, ops.StatsQuery{Hours: rng.Hours})
	if err != nil {
		return err
	}
	page := h.Page(c, "Dashboard")
	d := dashboardData(sum)
	d.Range, d.Since = rng, sum.Since
	for _, cat := range cats {
		d.Categories = append(d.Categories, views.CategoryCount{Name: cat.Category, Tools: cat.Tools})
	}
	for _, n := range page.Nav {
		if n.Href == approvalsPage {
			d.ApprovalsHref = approvalsPage
		}
	}
	for _, a := range h.Alerts.Firing() {
		d.Alerts = append(d.Alerts, views.DashAlert{Tool: a.Tool, FailureRate: a.FailureRate, Calls: a.Calls, Failed: a.Failed,
			Window: a.Window, Threshold: a.Threshold, Since: views.Stamp(a.Since) + " UTC"})
	}
	ready := h.Health.Check(ctx)
	d.Embedder = inUse(ready, "embedder")
	d.Sandbox = inUse(ready, "sandbox")
	if _, ok := ready.Components["tool_files"]; ok {
		d.ToolFiles = inUse(ready, "tool_files")
	}
	return h.Render(c, http.StatusOK, views.Dashboard(page, d))
}

// dashboardData turns the usage summary into the page's figures.
func dashboardData(sum *ops.Summary) views.DashboardData {
	d := views.DashboardData{Calls: sum.Calls, Succeeded: sum.Succeeded, Failed: sum.Failed, Refused: sum.Refused, Open: sum.Open,
		SuccessRate: sum.SuccessRate, P50Ms: sum.P50Ms, P95Ms: sum.P95Ms, CacheHitRate: sum.CacheHitRate,
		PendingApprovals: sum.PendingApprovals, RisingMinCalls: ops.RisingMinCalls}
	hours := make([]views.DashHour, len(sum.Hourly))
	for i, hc := range sum.Hourly {
		hours[i] = views.DashHour{Start: hc.Start, Succeeded: hc.Succeeded, Failed: hc.Failed, Refused: hc.Refused}
	}
	d.Chart = views.NewDashChart(hours)
	byName := map[string]ops.ToolStats{}
	for _, t := range sum.Tools {
		byName[t.Tool] = t
	}
	for _, name := range sum.Top {
		t := byName[name]
		row := views.DashTool{Name: t.Tool, Calls: t.Calls, Ran: t.Succeeded + t.Failed, SuccessRate: t.SuccessRate, P95Ms: t.P95Ms}
		if len(t.Failures) > 0 {
			row.TopFailure = t.Failures[0].Code
		}
		d.Top = append(d.Top, row)
	}
	rq := sum.Retrieval
	d.Retrieval = views.DashRetrieval{Measured: rq.Measured, OfferedRate: rq.OfferedRate, MeanRank: rq.MeanRank,
		Top1Rate: rq.Top1Rate, NotOffered: rq.NotOffered, UnknownTools: rq.UnknownTools}
	missed := slices.Clone(rq.Tools)
	slices.SortStableFunc(missed, func(a, b ops.ToolRetrieval) int { return cmp.Compare(b.NotOffered, a.NotOffered) })
	for _, t := range missed[:min(5, len(missed))] {
		if t.NotOffered > 0 {
			d.Retrieval.Missed = append(d.Retrieval.Missed, views.DashMissed{Name: t.Tool, NotOffered: t.NotOffered, Measured: t.Measured})
		}
	}
	for _, r := range sum.Rising {
		d.Rising = append(d.Rising, views.DashRising{Name: r.Tool, RecentCalls: r.RecentCalls, RecentFailed: r.RecentFailed,
			RecentRate: r.RecentRate, PriorCalls: r.PriorCalls, PriorFailed: r.PriorFailed, PriorRate: r.PriorRate})
	}
	return d
}

// inUse reads one component of the readiness report, as /readyz states it.
func inUse(r ops.Readiness, name string) views.DashComponent {
	comp, ok := r.Components[name]
	if !ok {
		return views.DashComponent{Status: "unknown", Detail: "not reported by this server"}
	}
	return views.DashComponent{Status: comp.Status, Detail: comp.Detail}
}
