package catalog

import (
	"context"
	"fmt"
	"testing"

	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/formats"
	"toolbelt/services/tooldef"
)

// TestRenderAgain: renderings stored by an earlier revision of the
// renderer are replaced at start by what the current one makes, every
// version's (earlier and retired ones too), once.
func TestRenderAgain(t *testing.T) {
	ctx := context.Background()
	store, _ := modelstest.Store(t)
	reg := NewRegistry(store, quiet)
	if n, err := reg.RenderAgain(ctx); err != nil || n != 0 {
		t.Fatalf("a new database rendered %d versions (%v)", n, err)
	}
	if _, err := reg.SeedBuiltins(ctx); err != nil {
		t.Fatal(err)
	}
	write, err := reg.Get(ctx, "file_write")
	if err != nil {
		t.Fatal(err)
	}
	next := write.Definition
	next.Version = "1.1.0"
	if _, err := reg.Publish(ctx, "file_write", next, nil); err != nil {
		t.Fatal(err)
	}
	// What an older revision stored: stale bodies and an older mark.
	stale := map[uint][]models.ToolExport{}
	var versions int
	err = store.EachVersionDefinition(ctx, func(id uint, _ string) error {
		versions++
		for _, f := range formats.Formats {
			stale[id] = append(stale[id], models.ToolExport{Format: f, Body: `{"stale":true}`})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.ReplaceExports(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if err := store.SetSetting(ctx, renderingsKey, "1"); err != nil {
		t.Fatal(err)
	}
	if n, err := reg.RenderAgain(ctx); err != nil || n != versions || n < 9 {
		t.Fatalf("rendered %d of %d versions again (%v)", n, versions, err)
	}
	err = store.EachVersionDefinition(ctx, func(id uint, raw string) error {
		def, _ := tooldef.Decode(raw)
		want, err := formats.RenderAll(def)
		if err != nil {
			return err
		}
		for _, f := range formats.Formats {
			got, err := store.ToolExport(ctx, id, f)
			if err != nil || got != string(want[f]) {
				t.Errorf("%s %s as %s: %q (%v), want the current rendering", def.Name, def.Version, f, got, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := reg.RenderAgain(ctx); err != nil || n != 0 {
		t.Fatalf("a second start rendered %d versions again (%v)", n, err)
	}
}

// TestRenderAgainPages: a catalog larger than a page is rendered again
// whole, page by page.
func TestRenderAgainPages(t *testing.T) {
	ctx := context.Background()
	store, _ := modelstest.Store(t)
	reg := NewRegistry(store, quiet)
	for i := range 1001 {
		def := tooldef.Definition{Name: fmt.Sprintf("tool_%04d", i), Version: "1.0.0", Description: "Look a record up.", Category: "api",
			Security: tooldef.Security{Level: tooldef.LevelSafe},
			Runner:   tooldef.Runner{Kind: tooldef.RunnerHTTP, Method: "GET", URL: "https://tools.invalid/x"}}
		if _, err := reg.Register(ctx, def, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.SetSetting(ctx, renderingsKey, "1"); err != nil {
		t.Fatal(err)
	}
	if n, err := reg.RenderAgain(ctx); err != nil || n != 1001 {
		t.Fatalf("rendered %d of 1001 versions again (%v)", n, err)
	}
	if made, _ := store.Setting(ctx, renderingsKey); made != formats.Revision {
		t.Errorf("revision stored %q, want %q", made, formats.Revision)
	}
}
