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
// earlier and retired tools alike), its id and its definition's JSON.
func (s *Store) EachVersionDefinition(ctx context.Context, fn func(id uint, definition string) error) error {
	var rows []ToolVersion
	if err := s.db.WithContext(ctx).Select("id", "definition").Order("id").Find(&rows).Error; err != nil {
		return fmt.Errorf("list tool versions: %w", err)
	}
	for _, v := range rows {
		if err := fn(v.ID, v.Definition); err != nil {
			return err
		}
	}
	return nil
}

// ReplaceExports stores new renderings of versions (by version id) and
// the setting key = value in one transaction: either every rendering and
// the setting change, or none does.
func (s *Store) ReplaceExports(ctx context.Context, exports map[uint][]ToolExport, key, value string) error {
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
		err := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "key"}}, DoUpdates: clause.AssignmentColumns([]string{"value"})}).
			Create(&Setting{Key: key, Value: value}).Error
		if err != nil {
			return fmt.Errorf("store setting %s: %w", key, err)
		}
		return nil
	})
}
