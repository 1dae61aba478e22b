package models

import (
	"context"
	"fmt"

	"gorm.io/gorm/clause"
)

// ToolFileRecord remembers which tool a tool file registered, so a file
// removed while the server was stopped retires its tool at the next start.
type ToolFileRecord struct {
	// Dir is the tool files directory (absolute) and File the file's name
	// in it.
	Dir  string `gorm:"primaryKey;size:1024"`
	File string `gorm:"primaryKey;size:255"`
	Tool string `gorm:"size:64;not null"`
}

// ToolFileRecords lists the records of a directory.
func (s *Store) ToolFileRecords(ctx context.Context, dir string) ([]ToolFileRecord, error) {
	var out []ToolFileRecord
	if err := s.db.WithContext(ctx).Where("dir = ?", dir).Order("file").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list tool file records: %w", err)
	}
	return out, nil
}

// SaveToolFileRecord records (or updates) the tool a file registered.
func (s *Store) SaveToolFileRecord(ctx context.Context, r ToolFileRecord) error {
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&r).Error
	if err != nil {
		return fmt.Errorf("record tool file %s: %w", r.File, err)
	}
	return nil
}

// ToolFilesOf lists the tool files that registered the named tool (in
// any tool files directory): a tool they manage is replaced when its file
// changes.
func (s *Store) ToolFilesOf(ctx context.Context, tool string) ([]ToolFileRecord, error) {
	var out []ToolFileRecord
	if err := s.db.WithContext(ctx).Where("tool = ?", tool).Order("dir, file").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list the tool files of %s: %w", tool, err)
	}
	return out, nil
}

// DeleteToolFileRecord forgets a file.
func (s *Store) DeleteToolFileRecord(ctx context.Context, dir, file string) error {
	if err := s.db.WithContext(ctx).Where("dir = ? AND file = ?", dir, file).Delete(&ToolFileRecord{}).Error; err != nil {
		return fmt.Errorf("forget tool file %s: %w", file, err)
	}
	return nil
}
