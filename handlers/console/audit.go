package console

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"toolbelt/handlers"
	"toolbelt/models"
	"toolbelt/services/audit"
	"toolbelt/views"
)

// AuditPage shows the audit log, newest first or in the order of a
// column, filtered, a page of 50 at a time. Filters that cannot be right
// answer 400 with the page and the reason, never a query.
func (h *Handler) AuditPage(c *gin.Context) error {
	d := views.AuditData{Actions: models.AuditActions, Actors: []string{models.ActorName(nil)},
		Filter: views.AuditFilterForm{Actor: c.Query("actor"), Action: c.Query("action"), Target: c.Query("target"),
			Since: c.Query("since"), Until: c.Query("until"), Sort: c.Query("sort")},
		Paged: c.Query("cursor") != ""}
	d.Filtered = d.Filter != (views.AuditFilterForm{Sort: d.Filter.Sort})
	if r := h.Audit.Retention(); r > 0 {
		d.Retention = fmt.Sprintf("Entries are kept %d days.", int(r.Hours()/24))
	}
	ps, err := h.Accounts.Principals(c.Request.Context())
	if err != nil {
		return err
	}
	for _, p := range ps {
		d.Actors = append(d.Actors, p.Name)
	}
	// A deleted principal's name is still an actor the log knows.
	if a := d.Filter.Actor; a != "" && !slices.Contains(d.Actors, a) {
		d.Actors = append(d.Actors, a)
	}
	keep := url.Values{}
	for k, v := range map[string]string{"actor": d.Filter.Actor, "action": d.Filter.Action, "target": d.Filter.Target,
		"since": d.Filter.Since, "until": d.Filter.Until, "sort": d.Filter.Sort} {
		if v != "" {
			keep.Set(k, v)
		}
	}
	// with is the page's query with one parameter set.
	with := func(k, v string) string {
		q := maps.Clone(keep)
		q.Set(k, v)
		return q.Encode()
	}
	d.NewestURL = "/admin/audit?" + keep.Encode()
	d.Sorting = views.Sorting{By: d.Filter.Sort, Default: "-time", URL: func(by string) string { return "/admin/audit?" + with("sort", by) }}
	d.ExportCSV = "/admin/audit/export?" + with("format", "csv")

	q, err := handlers.AuditQuery(c)
	var page *audit.Page
	if err == nil {
		page, err = h.Audit.List(c.Request.Context(), q)
	}
	if handlers.CodeOf(err) == models.CodeInvalidRequest {
		d.Error = "Not a filter the log can use: " + personMessage(err) + "."
		return h.Render(c, handlers.ErrorStatus(err), views.Audit(h.Page(c, "Audit log"), d))
	}
	if err != nil {
		return err
	}
	names, err := h.callerNames(c.Request.Context())
	if err != nil {
		return err
	}
	for _, e := range page.Entries {
		row := views.AuditRow{At: e.At, Actor: e.Actor, Role: e.ActorRole, Via: e.Via, ClientIP: e.ClientIP,
			Action: e.Action, Target: e.Target, Detail: e.Detail}
		row.TargetLabel, row.TargetHref = auditTarget(e.Target, names)
		if e.KeyID != 0 {
			row.Key = strconv.FormatUint(uint64(e.KeyID), 10)
			if e.KeyLabel != "" {
				row.Key = e.KeyLabel + " (" + row.Key + ")"
			}
		}
		d.Rows = append(d.Rows, row)
	}
	if page.NextCursor != "" {
		d.OlderURL = "/admin/audit?" + with("cursor", page.NextCursor)
	}
	return h.Render(c, http.StatusOK, views.Audit(h.Page(c, "Audit log"), d))
}

// AuditExport streams the audit log as CSV (or NDJSON with
// format=ndjson) for a signed-in admin, with the page's filters.
func (h *Handler) AuditExport(c *gin.Context) error {
	q, err := handlers.AuditQuery(c)
	if err != nil {
		return err
	}
	format := cmp.Or(c.Query("format"), "csv")
	if format != "csv" && format != "ndjson" {
		return models.ErrInvalid.Errorf("format=%s: use csv or ndjson", strconv.Quote(format))
	}
	handlers.ExportAudit(c, h.Audit, h.Log, q, format)
	return nil
}

// auditTarget names an audit entry's target ("kind:id") for a person and
// links it to its page: a principal by name (its calls), a tool, a call,
// an approval, an upstream server. Other kinds, and a principal no longer
// there, are shown as stored.
func auditTarget(target string, names callerNames) (label, href string) {
	kind, id, ok := strings.Cut(target, ":")
	if !ok || id == "" {
		return "", ""
	}
	switch kind {
	case "principal":
		n, err := strconv.ParseUint(id, 10, 32)
		if name, known := names[uint(n)]; err == nil && known {
			return "principal " + name, "/admin/calls?principal=" + id
		}
	case "tool":
		return "tool " + id, "/admin/tools/" + url.PathEscape(id)
	case "call":
		return "call " + id, "/admin/calls/" + url.PathEscape(id)
	case "approval":
		return "approval " + id, "/admin/approvals#approval-" + url.PathEscape(id)
	case "upstream":
		return "server " + id, "/admin/servers#server-" + url.PathEscape(id) + "-name"
	}
	return "", ""
}
