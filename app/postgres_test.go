package app

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/testlog"
	"toolbelt/models"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestInstancesStartTogetherOnPostgres starts three instances over one new
// Postgres database at the same moment, as a deployment does: each
// migrates under the advisory lock, one makes the admin and seeds the
// built-in tools, and all serve; the banner names the database without
// its password, and /readyz names the engine.
func TestInstancesStartTogetherOnPostgres(t *testing.T) {
	const password = "pg-password-in-url"
	// The test server trusts its socket, so any password is accepted.
	databaseURL := strings.Replace(dbtest.Postgres(t), "postgres@", "postgres:"+password+"@", 1)
	var (
		wg      sync.WaitGroup
		apps    = make([]*App, 3)
		banners = make([]testlog.Buffer, 3)
		errs    = make([]error, 3)
	)
	for i := range apps {
		cfg := testConfig(t, t.TempDir())
		cfg.DatabaseURL, cfg.AdminKey = databaseURL, testAdminKey
		wg.Go(func() {
			apps[i], errs[i] = New(context.Background(), cfg, Options{Stdout: &banners[i], LogOutput: io.Discard})
		})
	}
	wg.Wait()
	for i, a := range apps {
		if errs[i] != nil {
			t.Fatalf("instance %d: %v", i, errs[i])
		}
		t.Cleanup(func() { _ = a.Close() })
	}
	for i, a := range apps {
		banner := banners[i].String()
		if strings.Contains(banner, password) || !strings.Contains(banner, "database postgres://postgres:xxxxx@/") {
			t.Errorf("instance %d's banner shows the database as:\n%s", i, banner)
		}
		rec := serveGet(t, a, "/readyz")
		var ready struct {
			Components map[string]struct{ Status, Detail string }
		}
		if err := json.Unmarshal(rec, &ready); err != nil || ready.Components["database"].Detail != "postgres" {
			t.Errorf("instance %d's readiness: %s", i, rec)
		}
	}
	ctx := context.Background()
	if n, err := apps[0].Store.CountPrincipals(ctx); err != nil || n != 1 {
		t.Errorf("%d principals (%v), want the one admin", n, err)
	}
	// Every instance sees the one catalog, the built-in tools seeded once.
	var listed []int64
	for _, a := range apps {
		_, total, err := a.Store.ListTools(ctx, models.ToolFilter{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, total)
	}
	if listed[0] == 0 || listed[0] != listed[1] || listed[1] != listed[2] {
		t.Errorf("the instances list %v tools", listed)
	}
}

// serveGet answers path through a's handler.
func serveGet(t *testing.T, a *App, path string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	a.Handler.ServeHTTP(rec, req)
	return rec.Body.Bytes()
}
