package models

import (
	"context"
	"errors"
	"testing"
)

// An import's new tools and new versions land in one transaction: a
// version its check refuses leaves the new tools unstored too.
func TestImportToolsAllOrNothing(t *testing.T) {
	store := testStore(t)
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
}
