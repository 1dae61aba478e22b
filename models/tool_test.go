package models

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// An import's new tools and new versions land in one transaction: a
// version its check refuses leaves the new tools unstored too.
func TestImportToolsAllOrNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, store *Store) {
		ctx := context.Background()
		nt := func(name, version string) NewTool {
			return NewTool{Name: name, Summary: ToolSummary{Version: version, Category: "api", Level: "safe", Description: name},
				Version: &ToolVersion{Version: version, Definition: `{}`}}
		}
		if _, err := store.CreateTools(ctx, []NewTool{nt("old", "1.0.0")}); err != nil {
			t.Fatal(err)
		}
		refuse := errors.New("not greater")
		_, _, err := store.ImportTools(ctx, []NewTool{nt("fresh", "1.0.0")}, []NewTool{nt("old", "1.0.0")},
			func(name string, existing []string) error {
				if name != "old" || len(existing) != 1 || existing[0] != "1.0.0" {
					t.Errorf("check saw %s %v", name, existing)
				}
				return refuse
			})
		if !errors.Is(err, refuse) {
			t.Fatalf("import: %v, want the check's error", err)
		}
		if _, _, err := store.ToolByName(ctx, "fresh", true); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a new tool of the refused import was stored: %v", err)
		}
		created, published, err := store.ImportTools(ctx, []NewTool{nt("fresh", "1.0.0")}, []NewTool{nt("old", "1.0.1")},
			func(string, []string) error { return nil })
		if err != nil || len(created) != 1 || len(published) != 1 || published[0].Version != "1.0.1" {
			t.Fatalf("import: %v %v %v", created, published, err)
		}
	})
}

// TestDatabaseIsPrivate: the database and its WAL and shared-memory files
// are readable by the server only, and so is the data directory it makes;
// a database left 0644 by an older server is made private on open.
func TestDatabaseIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	path := filepath.Join(dir, "toolbelt.db")
	for round := range 2 {
		s, err := Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("private_%d", round)
		if _, err := s.CreateTool(context.Background(), name, ToolSummary{Version: "1.0.0", Category: "api", Level: "safe", Description: name}, &ToolVersion{Version: "1.0.0", Definition: `{}`}); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			info, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().Perm() != 0o600 {
				t.Errorf("round %d: %s is %v, want 0600", round, p, info.Mode().Perm())
			}
		}
		_ = s.Close()
		if round == 0 {
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				_ = os.Chmod(p, 0o644)
			}
		}
	}
	if info, _ := os.Stat(dir); info.Mode().Perm() != 0o700 {
		t.Errorf("data directory %v, want 0700", info.Mode().Perm())
	}
}
