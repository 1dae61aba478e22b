package models

import (
	"context"
	"crypto/sha256"
	"path/filepath"
	"reflect"
	"testing"

	"toolbelt/internal/dbtest"
)

// TestMigrateFromEmpty runs the migration production runs, on an empty
// database of each engine (every other test copies a migrated template):
// every table is made and the schema's fingerprint stored; a stale
// fingerprint migrates again, putting back what is missing.
func TestMigrateFromEmpty(t *testing.T) {
	ctx := context.Background()
	empty := map[string]func(t *testing.T) func() (*Store, error){
		"sqlite": func(t *testing.T) func() (*Store, error) {
			path := filepath.Join(t.TempDir(), "toolbelt.db")
			return func() (*Store, error) { return Open(ctx, path) }
		},
		"postgres": func(t *testing.T) func() (*Store, error) {
			url := dbtest.Postgres(t)
			return func() (*Store, error) { return OpenPostgres(ctx, url) }
		},
	}
	for name, database := range empty {
		t.Run(name, func(t *testing.T) {
			open := database(t)
			s := opened(t)(open())
			for _, m := range schemaModels() {
				if !s.db.Migrator().HasTable(m) {
					t.Errorf("no table for %T", m)
				}
			}
			if got, err := s.Setting(ctx, schemaKey); err != nil || got != schemaFingerprint() {
				t.Fatalf("stored fingerprint %q, %v; want %q", got, err, schemaFingerprint())
			}
			if !hasIndex(t, s, "idx_calls_stats") {
				t.Fatal("the hand-written call indexes are missing")
			}

			// A database the next build finds with another fingerprint.
			if err := s.db.Exec("DROP INDEX idx_calls_stats").Error; err != nil {
				t.Fatal(err)
			}
			if err := s.SetSetting(ctx, schemaKey, "an older build's"); err != nil {
				t.Fatal(err)
			}
			_ = s.Close()
			s = opened(t)(open())
			if !hasIndex(t, s, "idx_calls_stats") {
				t.Error("a stale fingerprint did not migrate again")
			}
			if got, _ := s.Setting(ctx, schemaKey); got != schemaFingerprint() {
				t.Errorf("fingerprint after migrating again %q", got)
			}
		})
	}
}

// TestSchemaFingerprintFollowsModels: the fingerprint is stable, and a
// change to a model's fields changes it.
func TestSchemaFingerprintFollowsModels(t *testing.T) {
	if schemaFingerprint() != schemaFingerprint() {
		t.Fatal("the fingerprint changes between calls")
	}
	type before struct {
		ID   uint
		Name string `gorm:"size:64"`
	}
	type after struct {
		ID   uint
		Name string `gorm:"size:128"`
	}
	sum := func(v any) string {
		h := sha256.New()
		writeStruct(h, reflect.TypeOf(v))
		return string(h.Sum(nil))
	}
	if sum(before{}) == sum(after{}) {
		t.Fatal("a changed tag leaves the fingerprint as it was")
	}
}
