package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"toolbelt/app"
	"toolbelt/internal/dbtest"
	"toolbelt/internal/testlog"
	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/access"
	"toolbelt/services/invoke"
	"toolbelt/services/netpolicy"
	"toolbelt/services/ops"
	"toolbelt/services/runners"
	"toolbelt/services/selection"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// testApp is the whole service over a fresh SQLite file (or Postgres
// database, see dbtest.Backend), built by package app as main builds it,
// with one key per role.
type testApp struct {
	t        *testing.T
	handler  http.Handler
	store    *models.Store
	invoker  *invoke.Invoker
	runners  *runners.Table
	selector *selection.Selector
	alerts   *ops.Alerts
	dbPath   string            // the SQLite file; on Postgres, the data directory's toolbelt.db, absent
	dbURL    string            // the Postgres database, "" on SQLite
	keys     map[string]string // role → key; "none" → ""
	ids      map[string]uint   // role → principal id
	logs     *testlog.Buffer   // what the server logged
	app      *app.App
	serving  bool // serve ran
}

// hostCaps is what the test host claims to run.
type hostCaps = ops.HostCaps

func newTestApp(t testing.TB) *testApp {
	t.Helper()
	return newTestAppWithHost(t, hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true})
}

func newTestAppWithHost(t testing.TB, host hostCaps) *testApp {
	t.Helper()
	return newTestAppWith(t, host, netpolicy.Policy{})
}

// testSecret is the configured secret the tests expect redacted.
const testSecret = "test-configured-secret"

// newTestAppWith builds the app with netPolicy as its egress policy, its
// config changed by edits, and a principal per role.
func newTestAppWith(t testing.TB, host hostCaps, netPolicy netpolicy.Policy, edits ...func(*app.Config)) *testApp {
	t.Helper()
	ta := startTestApp(t, host, netPolicy, edits...)
	for _, role := range []string{"reviewer", "agent"} {
		p, err := ta.app.Accounts.CreatePrincipal(context.Background(), access.NewPrincipal{Name: "test-" + role, Role: role}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ta.keys[role] = p.Key
		ta.ids[role] = p.ID
	}
	return ta
}

// startTestApp builds the app as newTestAppWith does, with the principals
// its database already holds (a first start: the admin alone).
func startTestApp(t testing.TB, host hostCaps, netPolicy netpolicy.Policy, edits ...func(*app.Config)) *testApp {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	// The sandbox uid must reach the work directories: the data directory
	// as the app makes it, and the one above it (t.TempDir makes its
	// directories private).
	if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
		t.Fatal(err)
	}
	// Debug level: tests check that not even debug lines carry secrets.
	cfg, err := app.ParseConfig([]string{"--addr", "127.0.0.1:0", "--data-dir", dir, "--tools-dir", "", "--log-level", "debug"},
		func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.NetPolicy, cfg.Secrets = netPolicy, map[string]string{"TB_TEST_SECRET": testSecret}
	// TOOLBELT_TEST_DATABASE=postgres runs the suite on Postgres. Either
	// database is a copy of the process's migrated template.
	if dbtest.Backend(t) == "postgres" {
		cfg.DatabaseURL = modelstest.PostgresURL(t)
	} else {
		modelstest.SQLiteFile(t, filepath.Join(dir, "toolbelt.db"))
	}
	for _, edit := range edits {
		edit(&cfg)
	}
	// Tests read the server's JSON log lines; benchmarks throw them away.
	logs := &testlog.Buffer{}
	var logTo io.Writer = logs
	if _, bench := t.(*testing.B); bench {
		logTo = io.Discard
	}
	a, err := app.New(ctx, cfg, app.Options{Stdout: io.Discard, LogOutput: logTo, Host: &host,
		Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	ta := &testApp{
		invoker: a.Invoker, runners: a.Runners, selector: a.Selector, alerts: a.Alerts, handler: a.Handler,
		store: a.Store, dbPath: filepath.Join(dir, "toolbelt.db"), dbURL: cfg.DatabaseURL, logs: logs, app: a,
		keys: map[string]string{"admin": a.AdminKey, "none": ""},
		ids:  map[string]uint{"admin": 1},
	}
	if tt, ok := t.(*testing.T); ok {
		ta.t = tt
	} else {
		// Benchmarks measure the server as main runs it: the records
		// written in batches, the lessons learned in the background.
		ta.serve(t)
	}
	return ta
}

// openOther opens a second store on the app's database, another
// connection reading what the app committed.
func (a *testApp) openOther(t testing.TB) *models.Store {
	t.Helper()
	var other *models.Store
	var err error
	if a.dbURL != "" {
		other, err = models.OpenPostgres(context.Background(), a.dbURL)
	} else {
		other, err = models.Open(context.Background(), a.dbPath)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	return other
}

// stored is everything the database holds, for tests that look for
// secrets in it: the SQLite file and its WAL as they are on disk, or every
// row of every Postgres table as text.
func (a *testApp) stored(t testing.TB) string {
	t.Helper()
	if a.dbURL == "" {
		raw, err := os.ReadFile(a.dbPath)
		if err != nil {
			t.Fatal(err)
		}
		wal, _ := os.ReadFile(a.dbPath + "-wal")
		return string(raw) + string(wal)
	}
	db := a.store.DB()
	var tables []string
	if err := db.Raw("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").Scan(&tables).Error; err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, table := range tables {
		var rows []string
		if err := db.Raw(`SELECT t::text FROM "` + table + `" t`).Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		b.WriteString(strings.Join(rows, "\n"))
	}
	if b.Len() == 0 {
		t.Fatal("the database holds nothing")
	}
	return b.String()
}

// serve runs the app's background jobs (Run, as main does: the callback
// deliveries among them) until the test ends; once.
func (a *testApp) serve(t testing.TB) {
	t.Helper()
	if a.serving {
		return
	}
	a.serving = true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.app.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// response is a recorded answer with its decoded JSON body.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, r.Body)
	}
	return m
}

// do sends a request as role ("none" sends no key). A string body is sent
// verbatim as application/json; other bodies are JSON-encoded.
func (a *testApp) do(t testing.TB, role, method, path string, body any) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req := httptest.NewRequest(method, path, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key := a.keys[role]; key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	rec := httptest.NewRecorder()
	a.handler.ServeHTTP(rec, req)
	return response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
}

// toolDef returns a valid definition named name, changed by edits.
func toolDef(name string, edits ...func(m map[string]any)) map[string]any {
	m := map[string]any{
		"name":        name,
		"version":     "1.0.0",
		"description": "Count the words of a text. Input: text. Output: the count.",
		"category":    "code",
		"tags":        []any{"text", "count"},
		"examples":    []any{"how many words are in this paragraph"},
		"parameters": map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"text": map[string]any{"type": "string", "description": "The text"}},
			"required":             []any{"text"},
			"additionalProperties": false,
		},
		"security":  map[string]any{"level": "safe"},
		"execution": map[string]any{"timeout": 5000},
		"runner":    map[string]any{"kind": "command", "argv": []any{"wc", "-w", "--", "{{text}}"}},
	}
	m["security"].(map[string]any)["sandbox"] = true
	for _, e := range edits {
		e(m)
	}
	return m
}

// problemPointers returns the pointers of a 422 body's problems.
func problemPointers(t testing.TB, r response) []string {
	t.Helper()
	body := r.JSON(t)
	e, _ := body["error"].(map[string]any)
	ps, _ := e["problems"].([]any)
	var out []string
	for _, p := range ps {
		out = append(out, p.(map[string]any)["pointer"].(string))
	}
	return out
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func mustJSON(v any) []byte {
	raw, _ := json.Marshal(v)
	return raw
}
