// Package modelstest opens real stores for tests: a fresh SQLite file in
// the test's temporary directory, closed when the test ends.
package modelstest

import (
	"context"
	"path/filepath"
	"testing"

	"toolbelt/models"
)

// Store opens a new database under t.TempDir and returns it with its path.
func Store(t testing.TB) (*models.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "toolbelt.db")
	store, err := models.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store, path
}
