package models

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Setting is one value the server keeps about its own data, by key (such
// as the revision of the renderer that made the stored exports).
type Setting struct {
	Key   string `gorm:"primaryKey;size:64"`
	Value string `gorm:"not null"`
}

// Setting returns the value stored under key, "" when none is.
func (s *Store) Setting(ctx context.Context, key string) (string, error) {
	var st Setting
	err := s.db.WithContext(ctx).Where("key = ?", key).First(&st).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read setting %s: %w", key, err)
	}
	return st.Value, nil
}

// EachVersionDefinition calls fn with every stored tool version (of current,
// earlier and retired tools alike), its id and its definition's JSON, in id
// order, reading them a page at a time so a large catalog is never held in
// memory whole.
func (s *Store) EachVersionDefinition(ctx context.Context, fn func(id uint, definition string) error) error {
	var rows []ToolVersion
	err := s.db.WithContext(ctx).Select("id", "definition").Order("id").
		FindInBatches(&rows, 500, func(_ *gorm.DB, _ int) error {
			for _, v := range rows {
				if err := fn(v.ID, v.Definition); err != nil {
					return err
				}
			}
			return nil
		}).Error
	if err != nil {
		return fmt.Errorf("list tool versions: %w", err)
	}
	return nil
}

// ReplaceExports stores new renderings of versions (by version id), each
// version's all at once in one transaction.
func (s *Store) ReplaceExports(ctx context.Context, exports map[uint][]ToolExport) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for id, list := range exports {
			if err := tx.Where("version_id = ?", id).Delete(&ToolExport{}).Error; err != nil {
				return fmt.Errorf("replace renderings of version %d: %w", id, err)
			}
			for i := range list {
				list[i].VersionID = id
			}
			if len(list) > 0 {
				if err := tx.Create(&list).Error; err != nil {
					return fmt.Errorf("replace renderings of version %d: %w", id, err)
				}
			}
		}
		return nil
	})
}

// SetSetting stores value under key.
func (s *Store) SetSetting(ctx context.Context, key, value string) error {
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "key"}}, DoUpdates: clause.AssignmentColumns([]string{"value"})}).
		Create(&Setting{Key: key, Value: value}).Error
	if err != nil {
		return fmt.Errorf("store setting %s: %w", key, err)
	}
	return nil
}
