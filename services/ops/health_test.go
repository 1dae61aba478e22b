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
