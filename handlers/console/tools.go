package console

import (
	"encoding/json"
	"errors"
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
	"toolbelt/services/access"
	"toolbelt/services/catalog"
	"toolbelt/services/formats"
	"toolbelt/services/tooldef"
	"toolbelt/views"
)

// consoleToolsPageSize is how many tools a console listing page shows.
const consoleToolsPageSize = 50

// ToolsPage lists the catalog with search, filters and pages.
func (h *Handler) ToolsPage(c *gin.Context) error {
	if err := handlers.OnlyQuery(c, "q", "category", "level", "tag", "retired", "offset", "sort"); err != nil {
		return err
	}
	offset, err := handlers.IntQuery(c, "offset")
	if err != nil {
		return err
	}
	f := views.ToolsFilter{Q: strings.TrimSpace(c.Query("q")), Category: c.Query("category"), Level: c.Query("level"), Tag: c.Query("tag"),
		Retired: c.Query("retired") != "", Sort: c.Query("sort")}
	page, err := h.Registry.List(c.Request.Context(), catalog.ListOptions{
		Category: f.Category, Level: f.Level, Tag: f.Tag, Query: f.Q, IncludeRetired: f.Retired,
		Limit: consoleToolsPageSize, Offset: offset, Sort: f.Sort,
	})
	if err != nil {
		return err
	}
	d := views.ToolsList{Filter: f, Categories: tooldef.Categories, Levels: tooldef.Levels, Total: page.Total,
		CanRegister: handlers.CurrentPrincipal(c).Role == access.RoleAdmin}
	for _, t := range page.Tools {
		d.Tools = append(d.Tools, views.ToolRow{Name: t.Name, Version: t.Version, Category: t.Category, Level: t.SecurityLevel,
			Tags: t.Tags, Description: t.Description, Retired: t.Retired, UpdatedAt: t.UpdatedAt})
	}
	if len(d.Tools) > 0 {
		d.From, d.To = offset+1, offset+len(d.Tools)
	}
	listURL := func(f views.ToolsFilter, off int) string {
		q := url.Values{}
		for k, v := range map[string]string{"q": f.Q, "category": f.Category, "level": f.Level, "tag": f.Tag, "sort": f.Sort} {
			if v != "" {
				q.Set(k, v)
			}
		}
		if f.Retired {
			q.Set("retired", "1")
		}
		if off > 0 {
			q.Set("offset", strconv.Itoa(off))
		}
		if len(q) == 0 {
			return "/admin/tools"
		}
		return "/admin/tools?" + q.Encode()
	}
	if offset > 0 {
		d.PrevURL = listURL(f, max(0, offset-consoleToolsPageSize))
	}
	if int64(offset+consoleToolsPageSize) < page.Total {
		d.NextURL = listURL(f, offset+consoleToolsPageSize)
	}
	d.TagURL = func(tag string) string {
		g := f
		g.Tag = tag
		return listURL(g, 0)
	}
	noTag := f
	noTag.Tag = ""
	d.NoTagURL = listURL(noTag, 0)
	d.Sorting = views.Sorting{By: f.Sort, Default: "name", URL: func(by string) string {
		g := f
		g.Sort = by
		return listURL(g, 0)
	}}
	return h.Render(c, http.StatusOK, views.ToolsPage(h.Page(c, "Tools"), d))
}

// ToolPage shows one tool: its definition, versions (with a diff of two),
// exports, learned queries and the try-it form.
func (h *Handler) ToolPage(c *gin.Context) error {
	if err := handlers.OnlyQuery(c, "from", "to"); err != nil {
		return err
	}
	d, err := h.toolDetail(c)
	if err != nil {
		return err
	}
	if d.CanTry {
		d.Try = views.TryForm{Fields: tryFields(json.RawMessage(d.Parameters), nil), SessionID: trySession(c)}
	}
	return h.Render(c, http.StatusOK, views.ToolPage(h.Page(c, d.Name), *d))
}

// toolDetail loads what the tool page shows. Retired tools are shown too
// (from their version history), so they can be rolled back.
func (h *Handler) toolDetail(c *gin.Context) (*views.ToolDetail, error) {
	ctx := c.Request.Context()
	name := c.Param("name")
	vers, err := h.Registry.Versions(ctx, name)
	if err != nil {
		return nil, err
	}
	current, _ := toolCurrentAndLatest(vers)
	tool, err := h.Registry.Version(ctx, name, current)
	if err != nil {
		return nil, err
	}
	role := handlers.CurrentPrincipal(c).Role
	def := tool.Definition
	d := &views.ToolDetail{
		Name: tool.Name, Version: tool.Version, Description: tool.Description, Category: tool.Category,
		Level: tool.SecurityLevel, Tags: tool.Tags, Examples: def.Examples, Retired: tool.Retired,
		Security: toolSecuritySettings(def.Security), Execution: toolExecutionSettings(def.Execution), Runner: toolRunnerSettings(def.Runner),
		Parameters: views.PrettyJSON(string(def.Parameters)),
		CanAdmin:   role == access.RoleAdmin,
		CanTry:     (role == access.RoleAdmin || role == access.RoleAgent) && !tool.Retired,
	}
	for _, v := range vers {
		d.Versions = append(d.Versions, views.VersionRow{Version: v.Version, Current: v.Current, CreatedAt: v.CreatedAt})
	}
	if d.ToolFiles, err = h.Registry.ToolFiles(ctx, name); err != nil {
		return nil, err
	}
	if err := h.versionDiff(c, d, vers); err != nil {
		return nil, err
	}
	if !tool.Retired {
		for _, f := range formats.All() {
			raw, err := h.Registry.Export(ctx, name, f.Name)
			if err != nil {
				return nil, err
			}
			d.Exports = append(d.Exports, views.ExportView{Format: f.Name, Label: f.Label, JSON: views.PrettyJSON(string(raw))})
		}
	}
	if d.CanAdmin {
		qs, err := h.Selector.LearnedQueries(ctx, name)
		if err != nil {
			return nil, err
		}
		for _, q := range qs {
			d.Learned = append(d.Learned, views.LearnedRow{ID: q.ID, Query: q.Query, Source: q.Source, CreatedAt: q.CreatedAt})
		}
	}
	return d, nil
}

// versionDiff fills the diff form's choices (by default the previous and
// the current version) and, when the form was sent, the diff.
func (h *Handler) versionDiff(c *gin.Context, d *views.ToolDetail, vers []catalog.ToolVersion) error {
	if len(vers) < 2 {
		return nil
	}
	d.DiffTo = d.Version
	for i, v := range vers {
		if v.Version == d.Version && i > 0 {
			d.DiffFrom = vers[i-1].Version
		}
	}
	if d.DiffFrom == "" {
		d.DiffFrom = vers[len(vers)-2].Version
	}
	from, to := c.Query("from"), c.Query("to")
	if from == "" && to == "" {
		return nil
	}
	if from == "" {
		from = d.DiffFrom
	}
	if to == "" {
		to = d.DiffTo
	}
	ctx := c.Request.Context()
	a, err := h.Registry.Version(ctx, d.Name, from)
	if err != nil {
		return err
	}
	b, err := h.Registry.Version(ctx, d.Name, to)
	if err != nil {
		return err
	}
	d.DiffFrom, d.DiffTo = from, to
	d.Diff = &views.VersionDiff{From: from, To: to, Lines: views.LineDiff(toolsPrettyDefinition(a.Definition), toolsPrettyDefinition(b.Definition))}
	return nil
}

// RollbackToolForm makes an earlier version current.
func (h *Handler) RollbackToolForm(c *gin.Context) error {
	name, version := c.Param("name"), c.PostForm("version")
	if _, err := h.Registry.Rollback(c.Request.Context(), name, version, handlers.CurrentPrincipal(c)); err != nil {
		return err
	}
	return Redirect(c, "/admin/tools/"+name, fmt.Sprintf("Version %s of %s is current again.", version, name))
}

// RetireToolForm retires a tool (after the page's confirmation): it is
// offered and callable no more, its history stays, and restoring its
// version brings it back.
func (h *Handler) RetireToolForm(c *gin.Context) error {
	name := c.Param("name")
	if err := h.Registry.Retire(c.Request.Context(), name, handlers.CurrentPrincipal(c)); err != nil {
		return err
	}
	return Redirect(c, "/admin/tools/"+name, fmt.Sprintf("%s is retired: agents are no longer offered it and its calls are refused. Restore its version to bring it back.", name))
}

// ForgetQueryForm removes a learned query of a tool.
func (h *Handler) ForgetQueryForm(c *gin.Context) error {
	id, err := handlers.IDParam(c, "id")
	if err != nil {
		return err
	}
	name := c.Param("name")
	if err := h.Selector.ForgetQuery(c.Request.Context(), name, id); err != nil {
		return err
	}
	return Redirect(c, "/admin/tools/"+name, "The learned query was removed.")
}

func toolSecuritySettings(s tooldef.Security) []views.ToolSetting {
	out := []views.ToolSetting{
		{Label: "Level", Value: s.Level},
		{Label: "Requires confirmation", Value: toolsYesNo(s.RequireConfirm)},
		{Label: "Sandbox", Value: toolsYesNo(s.Sandbox)},
		{Label: "Network", Value: toolsYesNo(s.Network)},
	}
	if s.ShellOperators {
		out = append(out, views.ToolSetting{Label: "Shell operators", Value: "allowed"})
	}
	if len(s.AllowedPaths) > 0 {
		out = append(out, views.ToolSetting{Label: "Allowed paths", Value: strings.Join(s.AllowedPaths, ", ")})
	}
	if s.RateLimit != nil {
		out = append(out, views.ToolSetting{Label: "Rate limit", Value: fmt.Sprintf("%d calls per %s", s.RateLimit.MaxCalls, toolsMillis(s.RateLimit.WindowMs))})
	}
	return out
}

func toolExecutionSettings(e tooldef.Execution) []views.ToolSetting {
	out := []views.ToolSetting{{Label: "Timeout", Value: toolsMillis(e.Timeout)}}
	if e.Retryable {
		out = append(out, views.ToolSetting{Label: "Retries", Value: strconv.Itoa(e.MaxRetries)})
	} else {
		out = append(out, views.ToolSetting{Label: "Retries", Value: "not retryable"})
	}
	if e.Cacheable {
		out = append(out, views.ToolSetting{Label: "Cache", Value: toolsMillis(e.CacheTTL)})
	} else {
		out = append(out, views.ToolSetting{Label: "Cache", Value: "off"})
	}
	return out
}

func toolRunnerSettings(r tooldef.Runner) []views.ToolSetting {
	out := []views.ToolSetting{{Label: "Kind", Value: r.Kind}}
	switch r.Kind {
	case tooldef.RunnerBuiltin:
		out = append(out, views.ToolSetting{Label: "Built-in", Value: r.Builtin})
	case tooldef.RunnerCommand:
		argv, _ := json.Marshal(r.Argv)
		out = append(out, views.ToolSetting{Label: "Argv", Value: string(argv)})
	case tooldef.RunnerHTTP:
		out = append(out, views.ToolSetting{Label: "Request", Value: r.Method + " " + r.URL})
		for _, k := range slices.Sorted(maps.Keys(r.Headers)) {
			out = append(out, views.ToolSetting{Label: "Header " + k, Value: r.Headers[k]})
		}
		if r.Body != "" {
			out = append(out, views.ToolSetting{Label: "Body", Value: r.Body})
		}
	case tooldef.RunnerComposite:
		for i, s := range r.Steps {
			out = append(out, views.ToolSetting{Label: fmt.Sprintf("Step %d", i+1), Value: s.Tool})
		}
	}
	return out
}

func toolsYesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// toolsMillis shows a duration in milliseconds the way people read it.
func toolsMillis(ms int) string {
	switch {
	case ms >= 60_000 && ms%60_000 == 0:
		return strconv.Itoa(ms/60_000) + " min"
	case ms >= 1000 && ms%1000 == 0:
		return strconv.Itoa(ms/1000) + " s"
	}
	return strconv.Itoa(ms) + " ms"
}

// toolsPrettyDefinition is a definition as indented JSON, the text versions are
// compared by.
func toolsPrettyDefinition(def tooldef.Definition) string {
	raw, err := json.MarshalIndent(def, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(raw)
}

// toolsValidation reports whether err is a validation error, and returns it.
func toolsValidation(err error) (*models.ValidationError, bool) {
	var ve *models.ValidationError
	ok := errors.As(err, &ve)
	return ve, ok
}
