// Package modelstest opens real stores for tests, closed when the test
// ends: a fresh SQLite file in the test's temporary directory, or a fresh
// database on the tests' own Postgres server (internal/dbtest).
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
	store, err := models.OpenPostgres(context.Background(), dbtest.Postgres(t))
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
