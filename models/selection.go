package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ToolEmbedding is the vector of a tool version's retrieval text under one
// embedding model. TextHash tells whether the text it was made from is
// still the one the index would embed, so a restart re-embeds nothing.
type ToolEmbedding struct {
	VersionID uint   `gorm:"primaryKey;autoIncrement:false"`
	Model     string `gorm:"primaryKey;size:128"`
	TextHash  string `gorm:"size:64;not null"`
	// Vector holds little-endian float32s.
	Vector    []byte `gorm:"not null"`
	CreatedAt time.Time
}

// LearnedQuery is a task text that led to a tool being used; it becomes
// retrieval text for that tool. Vector (little-endian float32s under
// Model) is kept so the query is embedded once.
type LearnedQuery struct {
	ID          uint      `gorm:"primaryKey" json:"id"`
	ToolName    string    `gorm:"size:64;not null;index:idx_learned_tool,priority:1" json:"tool"`
	Query       string    `gorm:"not null" json:"query"`
	Source      string    `gorm:"size:16;not null" json:"source"`
	SelectionID string    `gorm:"size:32" json:"selection_id,omitempty"`
	Model       string    `gorm:"size:128" json:"-"`
	Vector      []byte    `json:"-"`
	CreatedAt   time.Time `gorm:"index:idx_learned_tool,priority:2" json:"created_at"`
}

// Selection records one answer to "which tools fit this task?", so a later
// call or feedback in the same session can teach the index.
type Selection struct {
	ID          string `gorm:"primaryKey;size:32"`
	SessionID   string `gorm:"size:128;index:idx_selection_session,priority:1"`
	PrincipalID uint
	Query       string `gorm:"not null"`
	// Tools holds the chosen names as ",a,b,".
	Tools     string    `gorm:"not null"`
	CreatedAt time.Time `gorm:"index:idx_selection_session,priority:2"`
}

// Embeddings returns the stored vectors of versions under model.
func (s *Store) Embeddings(ctx context.Context, model string, versionIDs []uint) ([]ToolEmbedding, error) {
	var out []ToolEmbedding
	for start := 0; start < len(versionIDs); start += 500 {
		chunk := versionIDs[start:min(start+500, len(versionIDs))]
		var part []ToolEmbedding
		if err := s.db.WithContext(ctx).Where("model = ? AND version_id IN ?", model, chunk).Find(&part).Error; err != nil {
			return nil, fmt.Errorf("load embeddings: %w", err)
		}
		out = append(out, part...)
	}
	return out, nil
}

// SaveEmbeddings stores vectors, replacing older ones of the same version
// and model.
func (s *Store) SaveEmbeddings(ctx context.Context, es []ToolEmbedding) error {
	if len(es) == 0 {
		return nil
	}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).CreateInBatches(es, 200).Error
	if err != nil {
		return fmt.Errorf("save embeddings: %w", err)
	}
	return nil
}

// ActiveTool is what the selection index needs of a catalog entry.
type ActiveTool struct {
	Name      string
	Category  string
	Level     string
	VersionID uint
}

// ActiveTools lists every active tool with its current version id.
func (s *Store) ActiveTools(ctx context.Context) ([]ActiveTool, error) {
	var out []ActiveTool
	err := s.db.WithContext(ctx).Model(&Tool{}).
		Select("name, category, level, current_version_id AS version_id").
		Where("retired_at IS NULL").Order("name").Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("list active tools: %w", err)
	}
	return out, nil
}

// VersionDefinitions returns the stored definitions of versions by id.
func (s *Store) VersionDefinitions(ctx context.Context, ids []uint) (map[uint]string, error) {
	out := make(map[uint]string, len(ids))
	for start := 0; start < len(ids); start += 500 {
		chunk := ids[start:min(start+500, len(ids))]
		var rows []ToolVersion
		if err := s.db.WithContext(ctx).Select("id, definition").Where("id IN ?", chunk).Find(&rows).Error; err != nil {
			return nil, fmt.Errorf("load definitions: %w", err)
		}
		for _, r := range rows {
			out[r.ID] = r.Definition
		}
	}
	return out, nil
}

// ExportSizes returns, per version id, the byte size of its rendering in
// each format.
func (s *Store) ExportSizes(ctx context.Context, ids []uint) (map[uint]map[string]int, error) {
	out := make(map[uint]map[string]int, len(ids))
	for start := 0; start < len(ids); start += 500 {
		chunk := ids[start:min(start+500, len(ids))]
		var rows []struct {
			VersionID uint
			Format    string
			Size      int
		}
		err := s.db.WithContext(ctx).Model(&ToolExport{}).Select("version_id, format, LENGTH(body) AS size").
			Where("version_id IN ?", chunk).Scan(&rows).Error
		if err != nil {
			return nil, fmt.Errorf("load export sizes: %w", err)
		}
		for _, r := range rows {
			if out[r.VersionID] == nil {
				out[r.VersionID] = map[string]int{}
			}
			out[r.VersionID][r.Format] = r.Size
		}
	}
	return out, nil
}

// Exports returns the renderings of versions in one format, by version id.
func (s *Store) Exports(ctx context.Context, format string, ids []uint) (map[uint]string, error) {
	var rows []ToolExport
	if err := s.db.WithContext(ctx).Where("format = ? AND version_id IN ?", format, ids).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("load exports: %w", err)
	}
	out := make(map[uint]string, len(rows))
	for _, r := range rows {
		out[r.VersionID] = r.Body
	}
	return out, nil
}

// CreateSelections records selections in one transaction.
func (s *Store) CreateSelections(ctx context.Context, sels []*Selection) error {
	if err := s.db.WithContext(ctx).CreateInBatches(sels, 256).Error; err != nil {
		return fmt.Errorf("record selections: %w", err)
	}
	return nil
}

// DeleteSelectionsBefore removes selection records older than t.
func (s *Store) DeleteSelectionsBefore(ctx context.Context, t time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("created_at < ?", t).Delete(&Selection{})
	if res.Error != nil {
		return 0, fmt.Errorf("prune selections: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// SelectionByID returns a recorded selection.
func (s *Store) SelectionByID(ctx context.Context, id string) (*Selection, error) {
	var sel Selection
	if err := s.db.WithContext(ctx).Where("id = ?", id).First(&sel).Error; err != nil {
		return nil, notFound(err, "selection %q", id)
	}
	return &sel, nil
}

// LastSelection returns the newest selection of a session made no later
// than before.
func (s *Store) LastSelection(ctx context.Context, sessionID string, before time.Time) (*Selection, error) {
	var sel Selection
	err := s.db.WithContext(ctx).Where("session_id = ? AND created_at <= ?", sessionID, before.UTC()).Order("created_at DESC").First(&sel).Error
	if err != nil {
		return nil, notFound(err, "selection of session %q", sessionID)
	}
	return &sel, nil
}

// LastSelectionOf is LastSelection among principal's selections alone:
// two principals may name their sessions alike.
func (s *Store) LastSelectionOf(ctx context.Context, principal uint, sessionID string, before time.Time) (*Selection, error) {
	var sel Selection
	err := s.db.WithContext(ctx).Where("session_id = ? AND principal_id = ? AND created_at <= ?", sessionID, principal, before.UTC()).
		Order("created_at DESC").First(&sel).Error
	if err != nil {
		return nil, notFound(err, "selection of session %q", sessionID)
	}
	return &sel, nil
}

// AddLearnedQuery stores q and drops the oldest queries of its tool beyond
// keep, in one transaction. A query already learned for the tool is not
// stored twice. It reports whether q was added and which ids were dropped.
func (s *Store) AddLearnedQuery(ctx context.Context, q *LearnedQuery, keep int) (bool, []uint, error) {
	added := false
	var stale []uint
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := s.dialect.serialize(tx, "learned:"+q.ToolName); err != nil {
			return err
		}
		var n int64
		if err := tx.Model(&LearnedQuery{}).Where("tool_name = ? AND query = ?", q.ToolName, q.Query).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		if err := tx.Create(q).Error; err != nil {
			return err
		}
		added = true
		err := tx.Model(&LearnedQuery{}).Where("tool_name = ?", q.ToolName).
			Order("created_at DESC, id DESC").Offset(keep).Pluck("id", &stale).Error
		if err != nil || len(stale) == 0 {
			return err
		}
		return tx.Where("id IN ?", stale).Delete(&LearnedQuery{}).Error
	})
	if err != nil {
		return false, nil, fmt.Errorf("learn query for tool %q: %w", q.ToolName, err)
	}
	return added, stale, nil
}

// LearnedQueries returns the learned queries of one tool, newest first, or
// of every tool when name is empty.
func (s *Store) LearnedQueries(ctx context.Context, name string) ([]LearnedQuery, error) {
	q := s.db.WithContext(ctx).Order("created_at DESC, id DESC")
	if name != "" {
		q = q.Where("tool_name = ?", name)
	}
	var out []LearnedQuery
	if err := q.Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list learned queries: %w", err)
	}
	return out, nil
}

// DeleteLearnedQuery removes one learned query of a tool.
func (s *Store) DeleteLearnedQuery(ctx context.Context, name string, id uint) error {
	res := s.db.WithContext(ctx).Where("id = ? AND tool_name = ?", id, name).Delete(&LearnedQuery{})
	if res.Error != nil {
		return fmt.Errorf("delete learned query %d: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrNotFound.Errorf("learned query %d of tool %q", id, name)
	}
	return nil
}

// SaveLearnedVectors stores the vectors of learned queries under model.
func (s *Store) SaveLearnedVectors(ctx context.Context, qs []LearnedQuery) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, q := range qs {
			if err := tx.Model(&LearnedQuery{}).Where("id = ?", q.ID).
				Updates(map[string]any{"model": q.Model, "vector": q.Vector}).Error; err != nil {
				return err
			}
		}
		return nil
	})
}
