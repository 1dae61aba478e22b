// Package modelstest opens real stores for tests, closed when the test
// ends: a fresh SQLite file in the test's temporary directory, or a fresh
// database on the tests' own Postgres server (internal/dbtest).
//
// Each is a copy of one template the test process migrates once (a file
// copy on SQLite, CREATE DATABASE … TEMPLATE on Postgres): migrating
// costs a test a few hundred milliseconds, a copy a millisecond. Opening
// the copy migrates nothing (its schema fingerprint matches, see
// models/schema.go). TestMigrateFromEmpty in models keeps the path from
// an empty database tested on both backends.
package modelstest

import (
	"context"
	"path/filepath"
	"testing"

	"toolbelt/internal/dbtest"
	"toolbelt/models"
)

// Store opens a new store on the backend TOOLBELT_TEST_DATABASE chooses
// (SQLite unless it says postgres) and returns it with the path of its
// SQLite file ("" on Postgres).
func Store(t testing.TB) (*models.Store, string) {
	t.Helper()
	if dbtest.Backend(t) == "postgres" {
		return Postgres(t), ""
	}
	return SQLite(t)
}

// SQLite opens a new SQLite database under t.TempDir and returns it with
// its path, for tests of what only the file has (reopening it, its
// journal).
func SQLite(t testing.TB) (*models.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "toolbelt.db")
	SQLiteFile(t, path)
	store, err := models.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store, path
}

// Postgres opens a store on a new database of the tests' Postgres server.
// It skips t when Postgres is not installed (fails it on CI); a package
// using it should run its tests through dbtest.Main.
func Postgres(t testing.TB) *models.Store {
	t.Helper()
	store, err := models.OpenPostgres(context.Background(), PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// Each runs fn as a subtest on each backend, "sqlite" and "postgres", each
// with a new store.
func Each(t *testing.T, fn func(t *testing.T, store *models.Store)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		store, _ := SQLite(t)
		fn(t, store)
	})
	t.Run("postgres", func(t *testing.T) { fn(t, Postgres(t)) })
}

// PostgresURL is the URL of a new, migrated database of the tests'
// Postgres server, for tests that open it themselves (the app does).
func PostgresURL(t testing.TB) string {
	t.Helper()
	return dbtest.PostgresFrom(t, "toolbelt_template", func(url string) error {
		store, err := models.OpenPostgres(context.Background(), url)
		if err != nil {
			return err
		}
		return store.Close()
	})
}

// SQLiteFile writes a migrated, empty SQLite database at path (mode
// 0600), for tests that open it themselves (the app does).
func SQLiteFile(t testing.TB, path string) {
	t.Helper()
	dbtest.SQLiteFrom(t, path, "toolbelt", func(path string) error {
		store, err := models.Open(context.Background(), path)
		if err != nil {
			return err
		}
		// The WAL folded into the file, so the file alone is the database.
		if err := store.DB().Exec("PRAGMA wal_checkpoint(TRUNCATE)").Error; err != nil {
			_ = store.Close()
			return err
		}
		return store.Close()
	})
}
