// Package catalog is the register stage: the registry of tools and their
// versions (register, publish, roll back, retire), the built-in tools it
// seeds, tool files applied from a watched directory, and OpenAPI import.
package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/semver"

	"toolbelt/models"
	"toolbelt/services/formats"
	"toolbelt/services/redact"
	"toolbelt/services/tooldef"
)

// Registry is the register stage: it validates tool definitions, stores
// each as an immutable version with its LLM renderings, and serves the
// catalog.
type Registry struct {
	store    *models.Store
	log      *slog.Logger
	watchers []func(context.Context)
}

// OnChange registers fn to run after every change to the catalog (the
// selection index follows the registry this way).
func (r *Registry) OnChange(fn func(context.Context)) { r.watchers = append(r.watchers, fn) }

// Changed tells the watchers of a change made to the catalog's tools
// outside the registry (an upstream server deleted with its tools).
func (r *Registry) Changed(ctx context.Context) { r.changed(ctx) }

func (r *Registry) changed(ctx context.Context) {
	for _, fn := range r.watchers {
		fn(ctx)
	}
}

// NewRegistry returns a registry over store.
func NewRegistry(store *models.Store, log *slog.Logger) *Registry {
	return &Registry{store: store, log: log}
}

// Tool is a tool's current (or requested) version as the API shows it.
type Tool struct {
	Name          string             `json:"name" example:"file_read"`
	Version       string             `json:"version" example:"1.0.0"`
	Category      string             `json:"category" example:"filesystem"`
	SecurityLevel string             `json:"security_level" example:"safe"`
	Tags          []string           `json:"tags"`
	Description   string             `json:"description"`
	Current       bool               `json:"current"`
	Retired       bool               `json:"retired"`
	CreatedAt     time.Time          `json:"created_at"`
	Definition    tooldef.Definition `json:"definition"`
}

// ToolVersion is one entry of a tool's version history.
type ToolVersion struct {
	Version   string    `json:"version" example:"1.0.0"`
	Current   bool      `json:"current"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy *uint     `json:"created_by,omitempty"`
}

// ToolSummary is one catalog entry in a listing.
type ToolSummary struct {
	Name          string    `json:"name" example:"file_read"`
	Version       string    `json:"version" example:"1.0.0"`
	Category      string    `json:"category" example:"filesystem"`
	SecurityLevel string    `json:"security_level" example:"safe"`
	Tags          []string  `json:"tags"`
	Description   string    `json:"description"`
	Retired       bool      `json:"retired"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// ListOptions filters and pages a catalog listing.
type ListOptions struct {
	Category       string
	Tag            string
	Level          string
	Query          string
	Format         string
	IncludeRetired bool
	Limit          int
	Offset         int
	// Sort orders the page (models.ToolSorts; "" is by name).
	Sort string
	// DeferLoading, with the anthropic format, lists the tools for
	// Anthropic's tool search: each marked defer_loading, with the search
	// tool to send beside them (ToolPage.SearchTool).
	DeferLoading bool
}

// Page sizes for listings.
const (
	DefaultPageSize = 100
	MaxPageSize     = 10_000
)

// ToolPage is one page of a listing: summaries, or renderings in Format.
type ToolPage struct {
	Tools   []ToolSummary     `json:"-"`
	Exports []json.RawMessage `json:"-"`
	// SearchTool is, with DeferLoading, the tool a Claude agent sends
	// undeferred to find the others.
	SearchTool json.RawMessage `json:"-"`
	Format     string          `json:"format,omitempty"`
	Total      int64           `json:"total"`
	Limit      int             `json:"limit"`
	Offset     int             `json:"offset"`
}

// CategoryCount is one row of the category index.
type CategoryCount struct {
	Category string `json:"category" example:"filesystem"`
	Tools    int64  `json:"tools" example:"3"`
}

// Register validates def and stores it as the first version of a new tool.
// Every problem is reported at once as a *models.ValidationError; a taken
// name is models.ErrConflict. Nothing is stored unless all is well.
func (r *Registry) Register(ctx context.Context, def tooldef.Definition, by *models.Principal) (*Tool, error) {
	ver, sum, err := r.prepare(ctx, &def, by)
	if err != nil {
		return nil, err
	}
	var t *models.Tool
	err = r.store.Audited(ctx, models.AuditToolRegister, func(tx *models.Store) (string, string, error) {
		var err error
		t, err = tx.CreateTool(ctx, def.Name, sum, ver)
		return toolTarget(def.Name), "version " + def.Version, err
	})
	if err != nil {
		return nil, err
	}
	r.log.InfoContext(ctx, "tool registered", "tool", def.Name, "version", def.Version, "by", models.ActorName(by))
	r.changed(ctx)
	return r.view(t, ver)
}

// Check normalizes and validates def as Register would, without storing
// anything, and returns the definition as it would be stored. A dry run
// (an OpenAPI import preview) shows exactly what registering would do.
func (r *Registry) Check(ctx context.Context, def tooldef.Definition) (tooldef.Definition, error) {
	if _, _, err := r.prepare(ctx, &def, nil); err != nil {
		return def, err
	}
	return def, nil
}

// Taken reports whether name belongs to a registered tool, active or
// retired.
func (r *Registry) Taken(ctx context.Context, name string) (bool, error) {
	_, _, err := r.store.ToolByName(ctx, name, true)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, models.ErrNotFound):
		return false, nil
	}
	return false, err
}

// ImportAll registers new tools and publishes new versions of existing
// ones in one transaction: all of them or none. Each update's version
// must be greater than every version its tool has had, as with Publish.
// The first invalid definition's *models.ValidationError is returned as
// it is; callers that want every problem check each definition first.
func (r *Registry) ImportAll(ctx context.Context, creates, updates []tooldef.Definition, by *models.Principal) (created, updated []*Tool, err error) {
	prepare := func(defs []tooldef.Definition) ([]models.NewTool, error) {
		batch := make([]models.NewTool, len(defs))
		for i := range defs {
			ver, sum, err := r.prepare(ctx, &defs[i], by)
			if err != nil {
				return nil, err
			}
			batch[i] = models.NewTool{Name: defs[i].Name, Summary: sum, Version: ver}
		}
		return batch, nil
	}
	newTools, err := prepare(creates)
	if err != nil {
		return nil, nil, err
	}
	newVersions, err := prepare(updates)
	if err != nil {
		return nil, nil, err
	}
	versionOf := map[string]string{}
	for _, d := range updates {
		versionOf[d.Name] = d.Version
	}
	var made, published []*models.Tool
	err = r.store.Audited(ctx, models.AuditToolImport, func(tx *models.Store) (string, string, error) {
		var err error
		made, published, err = tx.ImportTools(ctx, newTools, newVersions, func(name string, existing []string) error {
			return checkGreater(versionOf[name], existing)
		})
		names := func(batch []models.NewTool) string {
			out := make([]string, len(batch))
			for i, t := range batch {
				out[i] = t.Name + " " + t.Version.Version
			}
			return strings.Join(out, ", ")
		}
		return "tools", fmt.Sprintf("registered [%s], published [%s]", names(newTools), names(newVersions)), err
	})
	if err != nil {
		return nil, nil, err
	}
	view := func(tools []*models.Tool, batch []models.NewTool, what string) ([]*Tool, error) {
		out := make([]*Tool, len(tools))
		for i, t := range tools {
			r.log.InfoContext(ctx, what, "tool", t.Name, "version", batch[i].Version.Version, "by", models.ActorName(by))
			if out[i], err = r.view(t, batch[i].Version); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if created, err = view(made, newTools, "tool registered"); err != nil {
		return nil, nil, err
	}
	if updated, err = view(published, newVersions, "tool version published"); err != nil {
		return nil, nil, err
	}
	if len(made)+len(published) > 0 {
		r.changed(ctx)
	}
	return created, updated, nil
}

// checkGreater refuses a version not greater (semver) than every version
// a tool has had.
func checkGreater(version string, existing []string) error {
	for _, e := range existing {
		if semver.Compare("v"+version, "v"+e) <= 0 {
			latest := slices.MaxFunc(existing, func(a, b string) int { return semver.Compare("v"+a, "v"+b) })
			return &models.ValidationError{What: "tool definition", Problems: []models.Problem{{
				Pointer: "/version",
				Message: fmt.Sprintf("%s must be greater than every published version; the highest is %s", version, latest),
			}}}
		}
	}
	return nil
}

// Publish stores def as a new current version of the named tool. Its
// version must be greater (semver) than every version the tool has had.
func (r *Registry) Publish(ctx context.Context, name string, def tooldef.Definition, by *models.Principal) (*Tool, error) {
	if def.Name == "" {
		def.Name = name
	}
	if def.Name != name {
		return nil, &models.ValidationError{What: "tool definition", Problems: []models.Problem{{
			Pointer: "/name", Message: fmt.Sprintf("%q does not match the tool in the path, %q; a tool cannot be renamed", def.Name, name),
		}}}
	}
	if _, _, err := r.store.ToolByName(ctx, name, true); err != nil {
		return nil, err
	}
	ver, sum, err := r.prepare(ctx, &def, by)
	if err != nil {
		return nil, err
	}
	var t *models.Tool
	err = r.store.Audited(ctx, models.AuditToolPublish, func(tx *models.Store) (string, string, error) {
		var err error
		t, err = tx.PublishToolVersion(ctx, name, sum, ver, func(existing []string) error {
			return checkGreater(def.Version, existing)
		})
		return toolTarget(name), "version " + def.Version, err
	})
	if err != nil {
		return nil, err
	}
	r.log.InfoContext(ctx, "tool version published", "tool", name, "version", def.Version, "by", models.ActorName(by))
	r.changed(ctx)
	return r.view(t, ver)
}

// prepare normalizes and validates def and renders its LLM formats.
func (r *Registry) prepare(ctx context.Context, def *tooldef.Definition, by *models.Principal) (*models.ToolVersion, models.ToolSummary, error) {
	tooldef.Normalize(def)
	known := func(name string) bool {
		_, _, err := r.store.ToolByName(ctx, name, false)
		return err == nil
	}
	_, ps := tooldef.Validate(def, known)
	if len(ps) > 0 {
		return nil, models.ToolSummary{}, &models.ValidationError{What: "tool definition", Problems: ps}
	}
	exports, err := formats.RenderAll(*def)
	if err != nil {
		return nil, models.ToolSummary{}, fmt.Errorf("render tool %q: %w", def.Name, err)
	}
	raw, err := json.Marshal(def)
	if err != nil {
		return nil, models.ToolSummary{}, fmt.Errorf("encode tool %q: %w", def.Name, err)
	}
	ver := &models.ToolVersion{Version: def.Version, Definition: string(raw)}
	for _, f := range formats.Formats {
		ver.Exports = append(ver.Exports, models.ToolExport{Format: f, Body: string(exports[f])})
	}
	if by != nil {
		ver.CreatedBy = &by.ID
	}
	return ver, summaryOf(def), nil
}

// renderingsKey is the setting holding the formats revision the stored
// renderings were made with.
const renderingsKey = "formats_revision"

// RenderAgain renders every stored version again when the stored
// renderings were made by another revision of the renderer (see
// formats.Revision), so an upgrade never serves a rendering the current
// code would not make. It returns how many versions it rendered; 0 when
// the renderings are current. Versions are rendered and written a page at
// a time, and the revision is stored only once all are: a start that stops
// halfway renders them all again next time.
func (r *Registry) RenderAgain(ctx context.Context) (int, error) {
	made, err := r.store.Setting(ctx, renderingsKey)
	if err != nil || made == formats.Revision {
		return 0, err
	}
	const page = 500
	rendered := 0
	exports := map[uint][]models.ToolExport{}
	write := func() error {
		err := r.store.ReplaceExports(ctx, exports)
		rendered += len(exports)
		clear(exports)
		return err
	}
	err = r.store.EachVersionDefinition(ctx, func(id uint, raw string) error {
		def, err := tooldef.Decode(raw)
		if err != nil {
			return fmt.Errorf("version %d: %w", id, err)
		}
		bodies, err := formats.RenderAll(def)
		if err != nil {
			// A version stored before a rule it breaks (a property name a
			// provider refuses) keeps its renderings: the server starts.
			r.log.WarnContext(ctx, "tool version not rendered again; its stored renderings stay",
				"tool", def.Name, "version", def.Version, "err", err)
			return nil
		}
		for _, f := range formats.Formats {
			exports[id] = append(exports[id], models.ToolExport{Format: f, Body: string(bodies[f])})
		}
		if len(exports) == page {
			return write()
		}
		return nil
	})
	if err == nil {
		err = write()
	}
	if err == nil {
		err = r.store.SetSetting(ctx, renderingsKey, formats.Revision)
	}
	if err != nil {
		return 0, err
	}
	if rendered > 0 {
		r.log.InfoContext(ctx, "tool renderings made again", "versions", rendered, "from_revision", made, "revision", formats.Revision)
	}
	return rendered, nil
}

func summaryOf(def *tooldef.Definition) models.ToolSummary {
	return models.ToolSummary{
		Version:     def.Version,
		Category:    def.Category,
		Level:       def.Security.Level,
		Tags:        def.Tags,
		Description: def.Description,
	}
}

// Get returns the current version of an active tool.
func (r *Registry) Get(ctx context.Context, name string) (*Tool, error) {
	if err := tooldef.CheckName(name); err != nil {
		return nil, err
	}
	t, v, err := r.store.ToolByName(ctx, name, false)
	if err != nil {
		return nil, err
	}
	return r.view(t, v)
}

// Export returns the current version of an active tool in format.
func (r *Registry) Export(ctx context.Context, name, format string) (json.RawMessage, error) {
	if err := checkFormat(format); err != nil {
		return nil, err
	}
	if err := tooldef.CheckName(name); err != nil {
		return nil, err
	}
	_, v, err := r.store.ToolByName(ctx, name, false)
	if err != nil {
		return nil, err
	}
	body, err := r.store.ToolExport(ctx, v.ID, format)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(body), nil
}

// Versions returns a tool's version history, oldest first. Retired tools
// keep theirs.
func (r *Registry) Versions(ctx context.Context, name string) ([]ToolVersion, error) {
	if err := tooldef.CheckName(name); err != nil {
		return nil, err
	}
	t, vers, err := r.store.ToolVersions(ctx, name)
	if err != nil {
		return nil, err
	}
	out := make([]ToolVersion, 0, len(vers))
	for _, v := range vers {
		out = append(out, ToolVersion{
			Version:   v.Version,
			Current:   t.CurrentVersionID != nil && *t.CurrentVersionID == v.ID,
			CreatedAt: v.CreatedAt,
			CreatedBy: v.CreatedBy,
		})
	}
	return out, nil
}

// NextPatch is the version after the highest a tool has had, its patch
// number raised: what a changed definition that states no version gets
// (the highest, not the current: after a rollback the current is lower).
func (r *Registry) NextPatch(ctx context.Context, name string) (string, error) {
	versions, err := r.Versions(ctx, name)
	if err != nil {
		return "", err
	}
	highest := ""
	for _, v := range versions {
		if highest == "" || semver.Compare("v"+v.Version, "v"+highest) > 0 {
			highest = v.Version
		}
	}
	return nextPatch(highest)
}

// Version returns one version of a tool, retired or not.
func (r *Registry) Version(ctx context.Context, name, version string) (*Tool, error) {
	if err := tooldef.CheckName(name); err != nil {
		return nil, err
	}
	t, v, err := r.store.ToolVersion(ctx, name, version)
	if err != nil {
		return nil, err
	}
	return r.view(t, v)
}

// Rollback makes an earlier version current again; it also restores a
// retired tool.
func (r *Registry) Rollback(ctx context.Context, name, version string, by *models.Principal) (*Tool, error) {
	if err := tooldef.CheckName(name); err != nil {
		return nil, err
	}
	if strings.TrimSpace(version) == "" {
		return nil, &models.ValidationError{What: "rollback", Problems: []models.Problem{{Pointer: "/version", Message: "is required: the version to make current"}}}
	}
	var t *models.Tool
	var v *models.ToolVersion
	err := r.store.Audited(ctx, models.AuditToolRollback, func(tx *models.Store) (string, string, error) {
		var err error
		t, v, err = tx.SetCurrentVersion(ctx, name, version, func(v *models.ToolVersion) (models.ToolSummary, error) {
			def, err := tooldef.Decode(v.Definition)
			if err != nil {
				return models.ToolSummary{}, err
			}
			return summaryOf(&def), nil
		})
		return toolTarget(name), "version " + version + " made current", err
	})
	if err != nil {
		return nil, err
	}
	r.log.InfoContext(ctx, "tool rolled back", "tool", name, "version", version, "by", models.ActorName(by))
	r.changed(ctx)
	return r.view(t, v)
}

// ToolFiles names the tool files (paths) that manage the tool: an edit
// made elsewhere is replaced when such a file changes.
func (r *Registry) ToolFiles(ctx context.Context, name string) ([]string, error) {
	records, err := r.store.ToolFilesOf(ctx, name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, rec := range records {
		out = append(out, filepath.Join(rec.Dir, rec.File))
	}
	return out, nil
}

// Retire takes a tool out of the catalog and of selection; its history
// stays readable and a new version or a rollback restores it.
func (r *Registry) Retire(ctx context.Context, name string, by *models.Principal) error {
	return r.RetireWhy(ctx, name, "", by)
}

// RetireWhy retires a tool as Retire does; its callers are told why
// (a sentence such as "an administrator disabled it").
func (r *Registry) RetireWhy(ctx context.Context, name, why string, by *models.Principal) error {
	if err := tooldef.CheckName(name); err != nil {
		return err
	}
	err := r.store.Audited(ctx, models.AuditToolRetire, func(tx *models.Store) (string, string, error) {
		return toolTarget(name), strings.TrimSpace("no longer offered; its calls are refused. " + why), tx.RetireToolWhy(ctx, name, why)
	})
	if err != nil {
		return err
	}
	r.log.InfoContext(ctx, "tool retired", "tool", name, "by", models.ActorName(by))
	r.changed(ctx)
	return nil
}

// List returns one page of the catalog, as summaries or in opts.Format.
func (r *Registry) List(ctx context.Context, opts ListOptions) (*ToolPage, error) {
	var bad []string
	if opts.Category != "" && !slices.Contains(tooldef.Categories, opts.Category) {
		bad = append(bad, fmt.Sprintf("category %q is not a category (use one of %s)", opts.Category, strings.Join(tooldef.Categories, ", ")))
	}
	if opts.Level != "" && !slices.Contains(tooldef.Levels, opts.Level) {
		bad = append(bad, fmt.Sprintf("level %q is not a security level (use safe, moderate or dangerous)", opts.Level))
	}
	if opts.Format != "" && !slices.Contains(formats.Formats, opts.Format) {
		bad = append(bad, fmt.Sprintf("format %q is not a format (use one of %s)", opts.Format, strings.Join(formats.Formats, ", ")))
	}
	if opts.DeferLoading && opts.Format != formats.FormatAnthropic {
		bad = append(bad, "defer_loading is Anthropic's tool search: send it with format=anthropic")
	}
	if opts.Limit < 1 || opts.Limit > MaxPageSize {
		bad = append(bad, fmt.Sprintf("limit must be between 1 and %d", MaxPageSize))
	}
	if opts.Offset < 0 {
		bad = append(bad, "offset must not be negative")
	}
	if _, ok := models.ToolSorts[opts.Sort]; opts.Sort != "" && !ok {
		bad = append(bad, fmt.Sprintf("sort %q is not an order (use name, category, level or updated, or one of them after '-' to reverse it)", opts.Sort))
	}
	if len(bad) > 0 {
		return nil, models.ErrInvalid.Errorf("%s", strings.Join(bad, "; "))
	}
	filter := models.ToolFilter{
		Category: opts.Category, Tag: opts.Tag, Level: opts.Level, Query: opts.Query,
		IncludeRetired: opts.IncludeRetired, Limit: opts.Limit, Offset: opts.Offset, Sort: opts.Sort,
	}
	page := &ToolPage{Format: opts.Format, Limit: opts.Limit, Offset: opts.Offset}
	if opts.Format != "" {
		bodies, total, err := r.store.ListToolExports(ctx, filter, opts.Format)
		if err != nil {
			return nil, err
		}
		page.Total = total
		page.Exports = make([]json.RawMessage, len(bodies))
		for i, b := range bodies {
			page.Exports[i] = json.RawMessage(b)
			if opts.DeferLoading {
				page.Exports[i] = formats.Deferred(page.Exports[i])
			}
		}
		if opts.DeferLoading {
			page.SearchTool = formats.AnthropicSearchTool()
		}
		return page, nil
	}
	tools, total, err := r.store.ListTools(ctx, filter)
	if err != nil {
		return nil, err
	}
	page.Total = total
	page.Tools = make([]ToolSummary, len(tools))
	for i, t := range tools {
		page.Tools[i] = ToolSummary{
			Name: t.Name, Version: t.Version, Category: t.Category, SecurityLevel: t.Level,
			Tags: splitTags(t.Tags), Description: t.Description, Retired: t.RetiredAt != nil, UpdatedAt: t.UpdatedAt,
		}
	}
	return page, nil
}

// Categories returns every category with its number of active tools, in
// the fixed category order.
func (r *Registry) Categories(ctx context.Context) ([]CategoryCount, error) {
	counts, err := r.store.CategoryCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]CategoryCount, 0, len(tooldef.Categories))
	for _, c := range tooldef.Categories {
		out = append(out, CategoryCount{Category: c, Tools: counts[c]})
	}
	return out, nil
}

func (r *Registry) view(t *models.Tool, v *models.ToolVersion) (*Tool, error) {
	def, err := tooldef.Decode(v.Definition)
	if err != nil {
		return nil, err
	}
	tags := def.Tags
	if tags == nil {
		tags = []string{}
	}
	// A header value stored before literal credentials were refused
	// shows masked; the runner reads the stored version, not this view.
	def.Runner.Headers = redact.MaskCredentials(def.Runner.Headers)
	return &Tool{
		Name: t.Name, Version: v.Version, Category: def.Category, SecurityLevel: def.Security.Level,
		Tags: tags, Description: def.Description,
		Current:   t.CurrentVersionID != nil && *t.CurrentVersionID == v.ID,
		Retired:   t.RetiredAt != nil,
		CreatedAt: v.CreatedAt, Definition: def,
	}, nil
}

func splitTags(s string) []string {
	s = strings.Trim(s, ",")
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}

func checkFormat(format string) error {
	if !slices.Contains(formats.Formats, format) {
		return models.ErrInvalid.Errorf("%q is not a format; use one of %s", format, strings.Join(formats.Formats, ", "))
	}
	return nil
}

// toolTarget names a tool in the audit log.
func toolTarget(name string) string { return "tool:" + name }
