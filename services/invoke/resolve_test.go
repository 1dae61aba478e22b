package invoke

import (
	"context"
	"strings"
	"testing"

	"toolbelt/models"
	"toolbelt/services/catalog"
	"toolbelt/services/embed"
)

// TestResolveGuard runs the resolve guard alone: current and pinned
// versions, unknown names and versions, retired tools.
func TestResolveGuard(t *testing.T) {
	ctx := context.Background()
	store, authz := catalogFixture(t)
	reg := catalog.NewRegistry(store, quiet)
	read, err := reg.Get(ctx, "file_read")
	if err != nil {
		t.Fatal(err)
	}
	next := read.Definition
	next.Version = "1.1.0"
	next.Description += " Now with a second version."
	if _, err := reg.Publish(ctx, "file_read", next, nil); err != nil {
		t.Fatal(err)
	}
	if err := reg.Retire(ctx, "file_list", nil); err != nil {
		t.Fatal(err)
	}
	inv := &Invoker{store: store, selector: newFixtureSelector(t, store, authz, embed.NewBuiltin(), 0), log: quiet}
	step := inv.resolve(passed)
	cases := []struct {
		name, tool, version string
		wantVersion         string // the version resolved, or "" when refused
		wantInMessage       string
		wantInSuggestion    string
	}{
		{name: "current version", tool: "file_read", wantVersion: "1.1.0"},
		{name: "pinned older version", tool: "file_read", version: read.Definition.Version, wantVersion: read.Definition.Version},
		{name: "misspelt name", tool: "file_raed", wantInMessage: `"file_raed" does not exist`, wantInSuggestion: "file_read"},
		{name: "not a tool name", tool: "../etc/passwd", wantInMessage: "does not exist", wantInSuggestion: "POST /api/v1/tools/select"},
		{name: "unknown version", tool: "file_read", version: "9.9.9", wantInMessage: `has no version "9.9.9"`},
		{name: "retired tool", tool: "file_list", wantInMessage: "does not exist"},
		{name: "retired tool, pinned version", tool: "file_list", version: read.Definition.Version, wantInMessage: "has no version"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &call{req: CallRequest{Tool: tc.tool, Version: tc.version, SessionID: "s"}}
			res := step(ctx, c)
			if tc.wantVersion != "" {
				if !res.Success || c.def.Version != tc.wantVersion || c.version == 0 {
					t.Fatalf("resolved %q (id %d), %+v; want version %s", c.def.Version, c.version, res.Error, tc.wantVersion)
				}
				return
			}
			if res.Success || res.Error.Code != models.CodeToolNotFound || res.Status != models.StatusRefused {
				t.Fatalf("want TOOL_NOT_FOUND, got %+v", res)
			}
			if !strings.Contains(res.Error.Message, tc.wantInMessage) || !strings.Contains(res.Error.Suggestion, tc.wantInSuggestion) {
				t.Errorf("message %q, suggestion %q", res.Error.Message, res.Error.Suggestion)
			}
		})
	}
	// The current version is remembered until the catalog changes.
	inv.CatalogChanged()
	if _, ok := inv.memo.tools.Load("file_read"); ok {
		t.Error("CatalogChanged kept a resolved version")
	}
}
