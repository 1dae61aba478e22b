package invoke

import (
	"context"
	"log/slog"
	"testing"

	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/access"
	"toolbelt/services/catalog"
	"toolbelt/services/embed"
	"toolbelt/services/ops"
	"toolbelt/services/selection"
)

// quiet discards the logs of the services under test.
var quiet = slog.New(slog.DiscardHandler)

// allHost is a host that runs every tool.
func allHost() ops.HostCaps {
	return ops.HostCaps{Chromium: true, Python: true, Node: true, Sandbox: true}
}

// catalogFixture is a store holding the built-in tools, and its authz.
func catalogFixture(t *testing.T) (*models.Store, *access.Authz) {
	t.Helper()
	store, _ := modelstest.Store(t)
	authz, err := access.OpenAuthz(context.Background(), access.AuthzDeps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := catalog.NewRegistry(store, quiet).SeedBuiltins(context.Background()); err != nil {
		t.Fatal(err)
	}
	return store, authz
}

// newFixtureSelector is a refreshed selector over store.
func newFixtureSelector(t *testing.T, store *models.Store, authz *access.Authz, emb embed.Embedder, keep int) *selection.Selector {
	t.Helper()
	s := selection.New(selection.Deps{Store: store, Authz: authz, Embedder: emb, Host: allHost(), KeepLearned: keep, Log: quiet})
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// passed is the step after a guard under test: it marks that the call got
// through.
func passed(context.Context, *call) ToolResult {
	return ToolResult{Status: models.StatusSucceeded, Success: true}
}

// running runs loop (a Run) until the test ends.
func running(tb testing.TB, loop func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Error(err)
		}
	})
}
