package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Tool is a registered tool's catalog entry. The current version's
// searchable fields are copied onto it so listing is one indexed query.
//
// idx_tools_listing (retired_at, name) lets the catalog listing walk active
// tools in name order without sorting.
type Tool struct {
	ID               uint   `gorm:"primaryKey"`
	Name             string `gorm:"size:64;not null;uniqueIndex;index:idx_tools_listing,priority:2"`
	CurrentVersionID *uint
	Version          string `gorm:"size:64;not null"`
	Category         string `gorm:"size:16;not null;index"`
	Level            string `gorm:"size:16;not null;index"`
	// Tags holds the current version's tags as ",a,b," so a tag filter is a
	// portable LIKE.
	Tags        string     `gorm:"size:1024;not null;default:''"`
	Description string     `gorm:"not null"`
	RetiredAt   *time.Time `gorm:"index:idx_tools_listing,priority:1"`
	// RetiredWhy says to a caller of the retired tool why it is out of
	// service, when more than retired can be said ("" otherwise).
	RetiredWhy string `gorm:"size:300;not null;default:''"`
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// ToolVersion is one immutable version of a tool: the definition as
// registered and its renderings in every LLM format, made once at
// registration.
type ToolVersion struct {
	ID         uint         `gorm:"primaryKey"`
	ToolID     uint         `gorm:"not null;uniqueIndex:idx_tool_version"`
	Version    string       `gorm:"size:64;not null;uniqueIndex:idx_tool_version"`
	Definition string       `gorm:"not null"`
	Exports    []ToolExport `gorm:"foreignKey:VersionID;constraint:OnDelete:CASCADE"`
	CreatedBy  *uint
	CreatedAt  time.Time
}

// ToolExport is a version rendered in one LLM format, made once at
// registration. A row of its own per format keeps each small, so listing a
// catalog in a format reads only that format's JSON.
type ToolExport struct {
	VersionID uint   `gorm:"primaryKey;autoIncrement:false"`
	Format    string `gorm:"primaryKey;size:32"`
	Body      string `gorm:"not null"`
}

// ToolSummary copies a version's searchable fields onto its tool.
type ToolSummary struct {
	Version     string
	Category    string
	Level       string
	Tags        []string
	Description string
}

func (t *Tool) apply(s ToolSummary, versionID uint) {
	t.Version = s.Version
	t.Category = s.Category
	t.Level = s.Level
	t.Tags = joinTags(s.Tags)
	t.Description = s.Description
	t.CurrentVersionID = &versionID
}

func joinTags(tags []string) string {
	if len(tags) == 0 {
		return ""
	}
	return "," + strings.Join(tags, ",") + ","
}

// catalogLock serializes the transactions that read a tool's versions and
// then change it (see dialect.serialize): registering, publishing and
// rolling back.
const catalogLock = "catalog"

// CreateTool stores a new tool with its first version, atomically. A taken
// name (even a retired one) is ErrConflict.
func (s *Store) CreateTool(ctx context.Context, name string, sum ToolSummary, v *ToolVersion) (*Tool, error) {
	tools, err := s.CreateTools(ctx, []NewTool{{Name: name, Summary: sum, Version: v}})
	if err != nil {
		return nil, err
	}
	return tools[0], nil
}

// NewTool is one tool for CreateTools: its name, catalog summary and first
// version.
type NewTool struct {
	Name    string
	Summary ToolSummary
	Version *ToolVersion
}

// CreateTools stores several new tools in one transaction, so a batch
// (an OpenAPI import) lands whole or not at all. A taken name (even a
// retired one) is ErrConflict and stores nothing.
func (s *Store) CreateTools(ctx context.Context, batch []NewTool) ([]*Tool, error) {
	created, _, err := s.ImportTools(ctx, batch, nil, nil)
	return created, err
}

// ImportTools stores new tools and new versions of existing ones in one
// transaction: all of them or none. check sees each published tool's
// existing version strings inside the transaction (see
// PublishToolVersion).
func (s *Store) ImportTools(ctx context.Context, creates, publishes []NewTool, check func(name string, existing []string) error) (created, published []*Tool, err error) {
	var failed string
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := s.dialect.serialize(tx, catalogLock); err != nil {
			return err
		}
		for _, nt := range creates {
			failed = nt.Name
			tool, err := createTool(tx, nt)
			if err != nil {
				return err
			}
			created = append(created, tool)
		}
		for _, nt := range publishes {
			failed = nt.Name
			tool, err := publishVersion(tx, nt.Name, nt.Summary, nt.Version, func(existing []string) error { return check(nt.Name, existing) })
			if err != nil {
				return err
			}
			published = append(published, tool)
		}
		return nil
	})
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return nil, nil, ErrConflict.Errorf("tool %q is already registered (publish a new version with PUT /api/v1/tools/%s)", failed, failed)
	}
	if err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) || errors.Is(err, ErrNotFound) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("store tool %q: %w", failed, err)
	}
	return created, published, nil
}

func createTool(tx *gorm.DB, nt NewTool) (*Tool, error) {
	tool := &Tool{Name: nt.Name}
	tool.apply(nt.Summary, 0)
	tool.CurrentVersionID = nil
	if err := tx.Create(tool).Error; err != nil {
		return nil, err
	}
	nt.Version.ToolID = tool.ID
	if err := tx.Create(nt.Version).Error; err != nil {
		return nil, err
	}
	tool.CurrentVersionID = &nt.Version.ID
	if err := tx.Model(tool).Update("current_version_id", nt.Version.ID).Error; err != nil {
		return nil, err
	}
	return tool, nil
}

// PublishToolVersion adds v as the new current version of the named tool.
// check sees every existing version string inside the transaction, so two
// concurrent publishers cannot both pass it. Publishing restores a retired
// tool.
func (s *Store) PublishToolVersion(ctx context.Context, name string, sum ToolSummary, v *ToolVersion, check func(existing []string) error) (*Tool, error) {
	var tool *Tool
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := s.dialect.serialize(tx, catalogLock); err != nil {
			return err
		}
		var err error
		tool, err = publishVersion(tx, name, sum, v, check)
		return err
	})
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return nil, ErrConflict.Errorf("tool %q already has version %s", name, v.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("publish tool %q version %s: %w", name, v.Version, err)
	}
	return tool, nil
}

func publishVersion(tx *gorm.DB, name string, sum ToolSummary, v *ToolVersion, check func(existing []string) error) (*Tool, error) {
	var tool Tool
	if err := tx.Where("name = ?", name).First(&tool).Error; err != nil {
		return nil, notFound(err, "tool %q", name)
	}
	var existing []string
	if err := tx.Model(&ToolVersion{}).Where("tool_id = ?", tool.ID).Pluck("version", &existing).Error; err != nil {
		return nil, err
	}
	if err := check(existing); err != nil {
		return nil, err
	}
	v.ToolID = tool.ID
	if err := tx.Create(v).Error; err != nil {
		return nil, err
	}
	tool.apply(sum, v.ID)
	tool.RetiredAt = nil
	if err := tx.Select("*").Save(&tool).Error; err != nil {
		return nil, err
	}
	return &tool, nil
}

// SetCurrentVersion makes an existing version current again (rollback).
// sum must describe that version. It restores a retired tool.
func (s *Store) SetCurrentVersion(ctx context.Context, name, version string, sum func(v *ToolVersion) (ToolSummary, error)) (*Tool, *ToolVersion, error) {
	var tool Tool
	var ver ToolVersion
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := s.dialect.serialize(tx, catalogLock); err != nil {
			return err
		}
		if err := tx.Where("name = ?", name).First(&tool).Error; err != nil {
			return notFound(err, "tool %q", name)
		}
		if err := tx.Where("tool_id = ? AND version = ?", tool.ID, version).First(&ver).Error; err != nil {
			return notFound(err, "tool %q version %q", name, version)
		}
		s, err := sum(&ver)
		if err != nil {
			return err
		}
		tool.apply(s, ver.ID)
		tool.RetiredAt = nil
		return tx.Select("*").Save(&tool).Error
	})
	if err != nil {
		return nil, nil, fmt.Errorf("roll back tool %q to %s: %w", name, version, err)
	}
	return &tool, &ver, nil
}

// RetireTool takes a tool out of the catalog; its versions stay readable.
func (s *Store) RetireTool(ctx context.Context, name string) error {
	return s.RetireToolWhy(ctx, name, "")
}

// RetireToolWhy retires a tool saying why, for its callers.
func (s *Store) RetireToolWhy(ctx context.Context, name, why string) error {
	now := time.Now().UTC()
	res := s.db.WithContext(ctx).Model(&Tool{}).
		Where("name = ? AND retired_at IS NULL", name).
		Updates(map[string]any{"retired_at": now, "retired_why": why})
	if res.Error != nil {
		return fmt.Errorf("retire tool %q: %w", name, res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrNotFound.Errorf("tool %q (or it is already retired)", name)
	}
	return nil
}

// ToolByName returns a tool and its current version. Retired tools are
// ErrNotFound unless includeRetired.
func (s *Store) ToolByName(ctx context.Context, name string, includeRetired bool) (*Tool, *ToolVersion, error) {
	var tool Tool
	if err := s.db.WithContext(ctx).Where("name = ?", name).First(&tool).Error; err != nil {
		return nil, nil, notFound(err, "tool %q", name)
	}
	if tool.RetiredAt != nil && !includeRetired {
		return nil, nil, ErrNotFound.Errorf("tool %q is retired (its versions stay readable; publish a new version or roll back to restore it)", name)
	}
	var ver ToolVersion
	if err := s.db.WithContext(ctx).First(&ver, *tool.CurrentVersionID).Error; err != nil {
		return nil, nil, fmt.Errorf("load current version of tool %q: %w", name, err)
	}
	return &tool, &ver, nil
}

// ToolVersions returns every version of a tool, oldest first.
func (s *Store) ToolVersions(ctx context.Context, name string) (*Tool, []ToolVersion, error) {
	var tool Tool
	if err := s.db.WithContext(ctx).Where("name = ?", name).First(&tool).Error; err != nil {
		return nil, nil, notFound(err, "tool %q", name)
	}
	var vers []ToolVersion
	if err := s.db.WithContext(ctx).Where("tool_id = ?", tool.ID).Order("id").Find(&vers).Error; err != nil {
		return nil, nil, fmt.Errorf("list versions of tool %q: %w", name, err)
	}
	return &tool, vers, nil
}

// ToolVersion returns one version of a tool, retired or not.
func (s *Store) ToolVersion(ctx context.Context, name, version string) (*Tool, *ToolVersion, error) {
	var tool Tool
	if err := s.db.WithContext(ctx).Where("name = ?", name).First(&tool).Error; err != nil {
		return nil, nil, notFound(err, "tool %q", name)
	}
	var ver ToolVersion
	if err := s.db.WithContext(ctx).Where("tool_id = ? AND version = ?", tool.ID, version).First(&ver).Error; err != nil {
		return nil, nil, notFound(err, "tool %q version %q", name, version)
	}
	return &tool, &ver, nil
}

// ToolFilter narrows a catalog listing. Empty fields do not filter.
type ToolFilter struct {
	Category       string
	Tag            string
	Level          string
	Query          string
	IncludeRetired bool
	Limit          int
	Offset         int
	// Sort orders the page: one of ToolSorts ("" is by name).
	Sort string
}

// ToolSorts are the orders a catalog listing takes, by name: a column, or
// the column in reverse with "-". The name breaks ties.
var ToolSorts = map[string]string{
	"name": "tools.name", "-name": "tools.name DESC",
	"category": "tools.category, tools.name", "-category": "tools.category DESC, tools.name",
	"level":   "CASE tools.level WHEN 'safe' THEN 0 WHEN 'moderate' THEN 1 ELSE 2 END, tools.name",
	"-level":  "CASE tools.level WHEN 'safe' THEN 0 WHEN 'moderate' THEN 1 ELSE 2 END DESC, tools.name",
	"updated": "tools.updated_at, tools.name", "-updated": "tools.updated_at DESC, tools.name",
}

// ListTools returns one page of the catalog in f.Sort's order (by name by
// default), and the total number of tools that match.
func (s *Store) ListTools(ctx context.Context, f ToolFilter) ([]Tool, int64, error) {
	q := s.filterTools(ctx, f)
	var total int64
	if err := q.Count(&total).Error; err != nil {
		return nil, 0, fmt.Errorf("count tools: %w", err)
	}
	var tools []Tool
	order, ok := ToolSorts[f.Sort]
	if !ok {
		order = ToolSorts["name"]
	}
	err := q.Select("tools.name, tools.version, tools.category, tools.level, tools.tags, tools.description, tools.retired_at, tools.updated_at").
		Order(order).Limit(f.Limit).Offset(f.Offset).Find(&tools).Error
	if err != nil {
		return nil, 0, fmt.Errorf("list tools: %w", err)
	}
	return tools, total, nil
}

// ListToolExports returns one page of the catalog as the current versions'
// renderings in format, ordered by name, and the total number that match.
func (s *Store) ListToolExports(ctx context.Context, f ToolFilter, format string) ([]string, int64, error) {
	q := s.filterTools(ctx, f)
	var total int64
	if err := q.Count(&total).Error; err != nil {
		return nil, 0, fmt.Errorf("count tools: %w", err)
	}
	bodies := make([]string, 0, min(f.Limit, int(total)))
	err := q.Joins("JOIN tool_exports ON tool_exports.version_id = tools.current_version_id AND tool_exports.format = ?", format).
		Order("tools.name").Limit(f.Limit).Offset(f.Offset).
		Pluck("tool_exports.body", &bodies).Error
	if err != nil {
		return nil, 0, fmt.Errorf("list tools as %s: %w", format, err)
	}
	return bodies, total, nil
}

// ToolExport returns a stored rendering of a version.
func (s *Store) ToolExport(ctx context.Context, versionID uint, format string) (string, error) {
	var e ToolExport
	if err := s.db.WithContext(ctx).Where("version_id = ? AND format = ?", versionID, format).First(&e).Error; err != nil {
		return "", notFound(err, "export of version %d as %s", versionID, format)
	}
	return e.Body, nil
}

func (s *Store) filterTools(ctx context.Context, f ToolFilter) *gorm.DB {
	q := s.db.WithContext(ctx).Model(&Tool{})
	if !f.IncludeRetired {
		q = q.Where("tools.retired_at IS NULL")
	}
	if f.Category != "" {
		q = q.Where("tools.category = ?", f.Category)
	}
	if f.Level != "" {
		q = q.Where("tools.level = ?", f.Level)
	}
	if f.Tag != "" {
		// Tags are stored lower case; SQLite's LIKE ignores ASCII case and
		// Postgres' does not, so the filter is lowered for both.
		q = q.Where("tools.tags LIKE ? ESCAPE '\\'", "%,"+escapeLike(strings.ToLower(f.Tag))+",%")
	}
	if f.Query != "" {
		like := "%" + escapeLike(strings.ToLower(f.Query)) + "%"
		q = q.Where("(LOWER(tools.name) LIKE ? ESCAPE '\\' OR LOWER(tools.description) LIKE ? ESCAPE '\\')", like, like)
	}
	return q
}

// CategoryCounts returns how many active tools each category holds.
func (s *Store) CategoryCounts(ctx context.Context) (map[string]int64, error) {
	var rows []struct {
		Category string
		N        int64
	}
	err := s.db.WithContext(ctx).Model(&Tool{}).
		Select("category, COUNT(*) AS n").Where("retired_at IS NULL").
		Group("category").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("count tools per category: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Category] = r.N
	}
	return out, nil
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// notFound turns gorm's record-not-found into ErrNotFound naming what was
// looked for, and passes other errors through.
func notFound(err error, format string, args ...any) error {
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return ErrNotFound.Errorf(format, args...)
	}
	return err
}
