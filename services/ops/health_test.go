package ops

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"toolbelt/models/modelstest"
	"toolbelt/services/catalog"
)

// TestHealthToolFiles: a tool file that cannot be applied makes readiness
// degraded, naming the file and why.
func TestHealthToolFiles(t *testing.T) {
	ctx := context.Background()
	store, _ := modelstest.Store(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "note.yaml"), []byte("name: note_words\nparameters: [not, a, schema\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tf := catalog.NewToolFiles(dir, catalog.NewRegistry(store, quiet), nil, quiet)
	if err := tf.Load(ctx); err != nil {
		t.Fatal(err)
	}
	ready := NewHealth(HealthDeps{Store: store, ToolFiles: tf}).Check(ctx)
	if c := ready.Components["tool_files"]; c.Status != "degraded" || !strings.Contains(c.Detail, "note.yaml: not valid YAML") ||
		!strings.HasPrefix(c.Detail, "0 tools from ") {
		t.Errorf("readiness: %+v", c)
	}
}

// quiet discards the logs of the services under test.
var quiet = slog.New(slog.DiscardHandler)

// TestWithoutHostPaths replaces each host path, given or absolute, and
// the paths below it, in details and reasons, and leaves prose alone.
func TestWithoutHostPaths(t *testing.T) {
	store, _ := modelstest.Store(t)
	abs, err := filepath.Abs("tools.d")
	if err != nil {
		t.Fatal(err)
	}
	h := NewHealth(HealthDeps{Store: store, HostPaths: map[string]string{"/srv/tb/data": "$TOOLBELT_DATA_DIR", "./tools.d": "$TOOLBELT_TOOLS_DIR"}})
	r := Readiness{Reasons: []string{"disk: the data directory's disk is full: 1 MiB free on the file system of /srv/tb/data"},
		Components: map[string]Component{
			"journal":    {Status: StatusDown, Detail: "the call journal cannot be written: open /srv/tb/data/journal/.probe: permission denied"},
			"tool_files": {Status: StatusOK, Detail: "2 tools from ./tools.d; " + abs + "/x.yaml: not valid YAML"},
		}}
	got := h.WithoutHostPaths(r)
	want := map[string]string{
		"journal":    "the call journal cannot be written: open $TOOLBELT_DATA_DIR/journal/.probe: permission denied",
		"tool_files": "2 tools from $TOOLBELT_TOOLS_DIR; $TOOLBELT_TOOLS_DIR/x.yaml: not valid YAML",
	}
	for name, d := range want {
		if got.Components[name].Detail != d {
			t.Errorf("%s: %q, want %q", name, got.Components[name].Detail, d)
		}
	}
	if w := "disk: the data directory's disk is full: 1 MiB free on the file system of $TOOLBELT_DATA_DIR"; got.Reasons[0] != w {
		t.Errorf("reason: %q, want %q", got.Reasons[0], w)
	}
	if !strings.Contains(r.Components["journal"].Detail, "/srv/tb/data") {
		t.Error("the admin's report was changed in place")
	}
}
