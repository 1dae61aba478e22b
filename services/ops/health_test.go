package ops

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"toolbelt/models/modelstest"
	"toolbelt/services/access"
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

// TestReadinessRefusesPastTheOutageGrace: with the database down and the
// journal taking the calls, the instance is ready within the outage
// grace and not ready past it, by the same Refusing the key check reads
// (access.Outage); the database answering again ends the outage.
func TestReadinessRefusesPastTheOutageGrace(t *testing.T) {
	ctx := context.Background()
	store, _ := modelstest.Store(t)
	journal := JournalProbe(t.TempDir())
	within, past := access.NewOutage(time.Hour), access.NewOutage(0)
	if r := NewHealth(HealthDeps{Store: store, Journal: journal, Outage: past}).Check(ctx); !r.Ready {
		t.Fatalf("the database answering: %+v", r)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	r := NewHealth(HealthDeps{Store: store, Journal: journal, Outage: within}).Check(ctx)
	if d := r.Components["database"].Detail; !r.Ready || !strings.Contains(d, "spooled to the journal") || !strings.Contains(d, "refused from") {
		t.Errorf("within the grace: %+v", r)
	}
	r = NewHealth(HealthDeps{Store: store, Journal: journal, Outage: past}).Check(ctx)
	if _, refusing := past.Refusing(time.Now()); r.Ready || !refusing || len(r.Reasons) != 1 ||
		!strings.Contains(r.Reasons[0], "longer than the outage grace (0s)") || r.Components["database"].Status != StatusDown {
		t.Errorf("past the grace: %+v (refusing %v)", r, refusing)
	}
}
