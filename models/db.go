package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
	sqlite3 "github.com/mattn/go-sqlite3"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"
)

// Store holds every query the application makes. Services receive it from
// main; nothing else opens the database.
type Store struct {
	db      *gorm.DB
	dialect dialect
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
// it: the embedded default, one file under the data directory.
//
// The DSN sets WAL mode, a busy timeout, foreign keys and immediate write
// transactions (so concurrent writers queue instead of failing on lock
// upgrades). Everything else that differs from Postgres is in dialect.
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
	db, err := gorm.Open(sqlite.New(sqlite.Config{DriverName: sqliteDriver, DSN: dsn}), gormConfig())
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	s, err := open(ctx, db, dialect{}, 8)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	return s, nil
}

// sqliteDriver is go-sqlite3 with temp_store=MEMORY on each connection.
// A batch of call records is several statements in one transaction, so
// SQLite keeps a statement journal for each; past 64 KiB it spills to a
// temporary file, one pwrite a few rows. In memory it costs no syscall.
const sqliteDriver = "sqlite3_toolbelt"

func init() {
	sql.Register(sqliteDriver, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		_, err := c.Exec("PRAGMA temp_store = MEMORY", nil)
		return err
	}})
}

// OpenPostgres connects to the Postgres database of databaseURL
// (postgres://user:password@host:5432/dbname?sslmode=…, or any connection
// string pgx takes) and migrates it, safely when several instances start
// at once. Errors never carry the URL: it holds a password.
func OpenPostgres(ctx context.Context, databaseURL string) (*Store, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, errors.New("open postgres database: TOOLBELT_DATABASE_URL is not a valid connection URL")
	}
	// Times come back in UTC, as SQLite gives them.
	utc := stdlib.OptionAfterConnect(func(_ context.Context, conn *pgx.Conn) error {
		conn.TypeMap().RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID,
			Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
		return nil
	})
	sqlDB := stdlib.OpenDB(*cfg, utc)
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), gormConfig())
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("open postgres database %s: %w", cfg.Database, err)
	}
	s, err := open(ctx, db, dialect{postgres: true}, 16)
	if err != nil {
		return nil, fmt.Errorf("open postgres database %s: %w", cfg.Database, err)
	}
	return s, nil
}

func gormConfig() *gorm.Config {
	return &gorm.Config{
		TranslateError: true,
		Logger:         logger.Default.LogMode(logger.Silent),
		NowFunc:        func() time.Time { return time.Now().UTC() },
	}
}

// open makes the store over db, which it closes when it fails.
func open(ctx context.Context, db *gorm.DB, d dialect, conns int) (*Store, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(conns)
	sqlDB.SetMaxIdleConns(conns)
	s := &Store{db: db, dialect: d}
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	return s, nil
}

// Engine names the database engine, for readiness and the start banner.
func (s *Store) Engine() string { return s.dialect.engine() }

// Shared reports whether several instances may use the database at once
// (Postgres); SQLite is one process's file.
func (s *Store) Shared() bool { return s.dialect.postgres }

// migrate brings the schema up to date. A column a model no longer has
// stays unread: upstreams.network (a stdio server sharing the host's
// network, replaced by Upstream.Egress before any release) leaves such a
// server with no network until an admin lists its hosts, never with more
// than it had.
//
// A database already migrated to this build's schema (its fingerprint,
// see schema.go, is stored) is left as is: asking gorm whether each
// column is there costs more than making them (a second on a busy
// machine), paid by every restart and by every test's store, which is a
// copy of one migrated template.
func (s *Store) migrate(ctx context.Context) error {
	fingerprint := schemaFingerprint()
	if s.schemaIs(ctx, fingerprint) {
		return nil
	}
	err := s.dialect.lockedMigration(ctx, s.db, func(db *gorm.DB) error {
		if err := db.AutoMigrate(schemaModels()...); err != nil {
			return err
		}
		for _, ddl := range slices.Concat(callIndexes, casbinIndexes) {
			if err := db.Exec(ddl).Error; err != nil {
				return err
			}
		}
		return db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "key"}}, DoUpdates: clause.AssignmentColumns([]string{"value"})}).
			Create(&Setting{Key: schemaKey, Value: fingerprint}).Error
	})
	if err != nil {
		return fmt.Errorf("migrate database: %w", err)
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
