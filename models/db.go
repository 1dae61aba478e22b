package models

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Store holds every query the application makes. Services receive it from
// main; nothing else opens the database.
type Store struct {
	db *gorm.DB
	// callStatements caches the call history's statement texts by
	// callStatement.
	callStatements sync.Map
}

// DB exposes the gorm handle, for tests that set up states no query of the
// store makes.
func (s *Store) DB() *gorm.DB { return s.db }

// private makes the database file (and its WAL and shared-memory files,
// which SQLite creates with the database's mode) readable by the server
// only: it holds key hashes, call arguments and results.
func private(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	defer f.Close()
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("make database %s private: %w", path, err)
	}
	for _, extra := range []string{path + "-wal", path + "-shm"} {
		if err := os.Chmod(extra, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("make %s private: %w", extra, err)
		}
	}
	return nil
}

// Open opens (creating if needed) the SQLite database at path and migrates
// it.
//
// This function is the one SQLite-specific place in the store: the DSN sets
// WAL mode, a busy timeout, foreign keys and immediate write transactions
// (so concurrent writers queue instead of failing on lock upgrades). Every
// query elsewhere goes through gorm and stays portable to Postgres.
func Open(ctx context.Context, path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	if err := private(path); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_busy_timeout", "10000")
	q.Set("_foreign_keys", "on")
	q.Set("_synchronous", "NORMAL")
	q.Set("_txlock", "immediate")
	// Each connection keeps its most used statements prepared (the call
	// history's chunked upserts above all).
	q.Set("_stmt_cache_size", "32")
	dsn := "file:" + path + "?" + q.Encode()
	db, err := gorm.Open(sqlite.Open(dsn), &gorm.Config{
		TranslateError: true,
		Logger:         logger.Default.LogMode(logger.Silent),
		NowFunc:        func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	sqlDB.SetMaxOpenConns(8)
	s := &Store{db: db}
	if err := s.migrate(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	err := s.db.WithContext(ctx).AutoMigrate(&Tool{}, &ToolVersion{}, &ToolExport{}, &Principal{}, &APIKey{},
		&ToolEmbedding{}, &LearnedQuery{}, &Selection{}, &Call{}, &Approval{}, &Callback{}, &ConsoleSession{}, &ToolFileRecord{}, &CasbinRule{}, &Setting{}, &RetrievalOutcome{})
	if err != nil {
		return fmt.Errorf("migrate database: %w", err)
	}
	for _, ddl := range slices.Concat(callIndexes, casbinIndexes) {
		if err := s.db.WithContext(ctx).Exec(ddl).Error; err != nil {
			return fmt.Errorf("migrate database: %w", err)
		}
	}
	return nil
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}

// Close closes the database.
func (s *Store) Close() error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}
