package models

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"toolbelt/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// backend makes databases of one engine for the store's tests, which run
// on each: database returns an opener of one new database, which opens it
// (again, after a close) and closes it when the test ends.
type backend struct {
	name     string
	database func(t *testing.T) func(t *testing.T) *Store
}

// Each database is a copy of a template migrated once per test process
// (as modelstest's are); TestMigrateFromEmpty migrates empty ones.
var backends = []backend{
	{"sqlite", func(t *testing.T) func(t *testing.T) *Store {
		path := filepath.Join(t.TempDir(), "toolbelt.db")
		dbtest.SQLiteFrom(t, path, "models", func(path string) error {
			s, err := Open(context.Background(), path)
			if err != nil {
				return err
			}
			if err := s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)").Error; err != nil {
				_ = s.Close()
				return err
			}
			return s.Close()
		})
		return func(t *testing.T) *Store { return opened(t)(Open(context.Background(), path)) }
	}},
	{"postgres", func(t *testing.T) func(t *testing.T) *Store {
		url := dbtest.PostgresFrom(t, "models_template", func(url string) error {
			s, err := OpenPostgres(context.Background(), url)
			if err != nil {
				return err
			}
			return s.Close()
		})
		return func(t *testing.T) *Store { return opened(t)(OpenPostgres(context.Background(), url)) }
	}},
}

// opened fails t on an error of Open and closes the store when t ends.
func opened(t *testing.T) func(*Store, error) *Store {
	return func(s *Store, err error) *Store {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}

// eachBackend runs fn as a subtest per engine with an opener of a new
// database.
func eachBackend(t *testing.T, fn func(t *testing.T, open func(t *testing.T) *Store)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b.database(t)) })
	}
}

// eachStore runs fn as a subtest per engine on a fresh store.
func eachStore(t *testing.T, fn func(t *testing.T, store *Store)) {
	t.Helper()
	eachBackend(t, func(t *testing.T, open func(t *testing.T) *Store) { fn(t, open(t)) })
}

// queryPlan is the plan the engine makes for q, as text. On Postgres,
// sequential scans are off for it: on a test's few rows a scan of the
// table is always cheapest, and what is checked is that an index can
// answer.
func queryPlan(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	var lines []string
	var err error
	if s.dialect.postgres {
		err = s.db.Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec("SET LOCAL enable_seqscan = off").Error; err != nil {
				return err
			}
			return tx.Raw("EXPLAIN "+q, args...).Scan(&lines).Error
		})
	} else {
		var rows []struct{ Detail string }
		err = s.db.Raw("EXPLAIN QUERY PLAN "+q, args...).Scan(&rows).Error
		for _, r := range rows {
			lines = append(lines, r.Detail)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// hasIndex reports whether the database holds an index of that name.
func hasIndex(t *testing.T, s *Store, name string) bool {
	t.Helper()
	q := "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?"
	if s.dialect.postgres {
		q = "SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = ?"
	}
	var n int64
	if err := s.db.Raw(q, name).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// sameTime reports whether a time read back is the one stored, to the
// microsecond Postgres keeps (SQLite keeps the nanoseconds).
func sameTime(got, want time.Time) bool {
	return got.Sub(want).Abs() < time.Microsecond
}
