package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/testlog"
	"toolbelt/services/ops"
)

// testConfig is the serve command's configuration over dir with no
// environment, changed by args.
func testConfig(t *testing.T, dir string, args ...string) Config {
	t.Helper()
	args = append([]string{"--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--tools-dir", "", "--sandbox", "none"}, args...)
	cfg, err := ParseConfig(args, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	// One TOOLBELT_OAUTH_KEY and TOOLBELT_VAULT_KEY for every instance,
	// as a cluster needs.
	cfg.OAuthKey, cfg.VaultKey = testOAuthKey, testVaultKey
	return cfg
}

// goroutines are the stacks of every goroutine, the caller's first.
func goroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// ours are the goroutines of the service: with a frame of this module,
// not the caller, not started by a test, and not in before (stack
// headers, "goroutine N [").
func ours(before map[string]bool) (blocked, busy []string) {
	for _, g := range goroutines()[1:] {
		if !hasFrame(g, "toolbelt/") || hasFrame(g, "toolbelt/app.Test") || before[header(g)] {
			continue
		}
		if state := g[strings.Index(g, "[")+1:]; strings.HasPrefix(state, "running") || strings.HasPrefix(state, "runnable") {
			busy = append(busy, g)
		} else {
			blocked = append(blocked, g)
		}
	}
	return blocked, busy
}

// existing are the goroutines there now, by header.
func existing() map[string]bool {
	m := map[string]bool{}
	for _, g := range goroutines() {
		m[header(g)] = true
	}
	return m
}

func header(stack string) string {
	h, _, _ := strings.Cut(stack, "[")
	return h
}

// hasFrame reports whether the goroutine's stack runs a function whose
// name starts with prefix (its creator does not count).
func hasFrame(stack, prefix string) bool {
	for _, line := range strings.Split(stack, "\n") {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

// leftAtStoreClose records, when the store is about to close, the
// goroutines of the service still there, then calls then. One blocked was
// never waited for; a busy one may be returning from its last Done, so it
// is given a moment to go, and counts if it stays or blocks.
func leftAtStoreClose(a *App, then func()) *[]string {
	before := existing()
	var left []string
	a.storeClosing = func() {
		defer then()
		for range 200 {
			blocked, busy := ours(before)
			if len(blocked) > 0 || len(busy) == 0 {
				left = append(blocked, busy...)
				return
			}
			left = busy
			runtime.Gosched()
			time.Sleep(time.Millisecond)
		}
	}
	return &left
}

// runWaits reports whether Run is waiting for its goroutines (its
// shutdown for the loops of its job group) with only the one running held
// left (waiting), or has gone on from the wait or returned (past).
func runWaits(held string) (waiting, past bool) {
	found, only := false, true
	for _, g := range goroutines()[1:] {
		switch {
		case hasFrame(g, "toolbelt/app.(*App).Run("):
			found, waiting = true, hasFrame(g, "golang.org/x/sync/errgroup.(*Group).Wait")
		case hasFrame(g, "toolbelt/services/cluster.(*Elector).lead("):
			// The elector waits for the leader's jobs as Run for its group.
			only = only && hasFrame(g, "sync.(*WaitGroup).Wait")
		case hasFrame(g, "toolbelt/app.(*jobs).stop("):
			// Run's shutdown waits for the loops of its group.
			only = only && hasFrame(g, "sync.(*WaitGroup).Wait")
		case (hasFrame(g, "toolbelt/app.(*App).Run.func") || hasFrame(g, "toolbelt/app.(*jobs).Go.func") ||
			hasFrame(g, "toolbelt/services/cluster.(*Elector).lead.func")) && !hasFrame(g, held):
			only = false
		}
	}
	return found && waiting && only, !found || !waiting
}

// holdingLog is a log that holds the goroutine writing the first line
// containing hold until release closes.
type holdingLog struct {
	testlog.Buffer
	hold          string
	held, release chan struct{}
	once          sync.Once
}

func (l *holdingLog) Write(p []byte) (int, error) {
	n, err := l.Buffer.Write(p)
	first := false
	if bytes.Contains(p, []byte(l.hold)) {
		l.once.Do(func() { first = true })
	}
	if first {
		close(l.held)
		<-l.release
	}
	return n, err
}

// TestRunEndsEveryGoroutine runs the service, uses what starts goroutines
// (a call that teaches the selector, an asynchronous call, a registration
// that schedules an index refresh, a tool file the watch applies, an alert
// whose webhook hangs), stops it, and checks that when the store closed no
// goroutine of the service was left, and that the store is closed when
// Run returns. The alerts monitor is held in its last log line after it
// is stopped, until Run is seen waiting for it: Run must not go on
// before.
func TestRunEndsEveryGoroutine(t *testing.T) {
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.d")
	if err := os.Mkdir(tools, 0o755); err != nil {
		t.Fatal(err)
	}
	hooked := make(chan struct{}, 1)
	webhook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server sees the client go
		select {
		case hooked <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}))
	defer webhook.Close()
	cfg := testConfig(t, dir, "--tools-dir", tools, "--log-level", "debug")
	cfg.Alerts = ops.AlertConfig{Window: time.Hour, Threshold: 0.5, MinCalls: 1, Webhook: webhook.URL, Every: 10 * time.Millisecond}
	logs := &holdingLog{hold: `"msg":"alert webhook"`, held: make(chan struct{}), release: make(chan struct{})}
	a, err := New(context.Background(), cfg, Options{Stdout: io.Discard, LogOutput: logs})
	if err != nil {
		t.Fatal(err)
	}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(logs.release) }) }
	left := leftAtStoreClose(a, release)
	var wentOn atomic.Bool
	go func() {
		<-logs.held
		defer release()
		for {
			waiting, past := runWaits("toolbelt/services/ops.(*Alerts)")
			if past {
				wentOn.Store(true)
				return
			}
			if waiting {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	client := &http.Client{}
	post := func(path string, body map[string]any, want int) map[string]any {
		t.Helper()
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", a.URL+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+a.AdminKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != want {
			t.Fatalf("POST %s: %d %v, want %d", path, resp.StatusCode, out, want)
		}
		return out
	}
	post("/api/v1/tools/select", map[string]any{"query": "write a file", "session_id": "s"}, 200)
	if res := post("/api/v1/calls", map[string]any{"tool": "file_write", "session_id": "s",
		"arguments": map[string]any{"path": "a.txt", "content": "x"}}, 200); res["success"] != true {
		t.Fatalf("call: %v", res)
	}
	post("/api/v1/calls", map[string]any{"tool": "file_list", "session_id": "s", "async": true, "arguments": map[string]any{}}, 202)
	post("/api/v1/tools", map[string]any{"name": "word_count", "version": "1.0.0", "category": "code",
		"description": "Count the words of a text. Input: text. Output: the count.",
		"parameters":  map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}},
		"security":    map[string]any{"level": "safe"},
		"runner":      map[string]any{"kind": "http", "method": "GET", "url": "https://tools.invalid/count"}}, 201)
	toolFile := "name: lookup\ndescription: Look a word up in the dictionary. Input: the word.\ncategory: api\n" +
		"parameters: {type: object, properties: {word: {type: string}}}\nsecurity: {level: safe}\n" +
		"runner: {kind: http, method: GET, url: 'https://tools.invalid/{{word}}'}\n"
	if err := os.WriteFile(filepath.Join(tools, "lookup.yaml"), []byte(toolFile), 0o644); err != nil {
		t.Fatal(err)
	}
	// Failures raise an alert: its webhook hangs until the monitor stops.
	for range 2 {
		post("/api/v1/calls", map[string]any{"tool": "file_read", "session_id": "s", "arguments": map[string]any{"path": "missing.txt"}}, 200)
	}
	select {
	case <-hooked:
	case <-time.After(30 * time.Second):
		t.Fatalf("no alert reached the webhook:\n%s", logs)
	}
	client.CloseIdleConnections()

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v\n%s", err, logs)
	}
	if wentOn.Load() {
		t.Error("Run went on while the alerts monitor still ran")
	}
	if len(*left) > 0 {
		t.Errorf("%d goroutines of the service were left when the store closed:\n\n%s", len(*left), strings.Join(*left, "\n\n"))
	}
	db, err := a.Store.DB().DB()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Ping(); err == nil {
		t.Error("the store is open after Run returned")
	}
	for _, want := range []string{`"msg":"shutting down"`, `"msg":"stopped"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %s", want)
		}
	}
	if strings.Contains(logs.String(), "database is closed") {
		t.Errorf("the store was used after it closed:\n%s", logs)
	}
}

// TestNewStartsNoGoroutine: building the App, over SQLite and over
// Postgres with Redis (change notices, shared queues), starts no
// goroutine of the service: Run starts them all.
func TestNewStartsNoGoroutine(t *testing.T) {
	for _, shared := range []bool{false, true} {
		name := "sqlite"
		if shared {
			name = "postgres and redis"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			tools := filepath.Join(dir, "tools.d")
			if err := os.Mkdir(tools, 0o755); err != nil {
				t.Fatal(err)
			}
			cfg := testConfig(t, dir, "--tools-dir", tools)
			if shared {
				cfg.DatabaseURL, cfg.RedisURL = dbtest.Postgres(t), dbtest.Redis(t)
			}
			before := existing()
			a, err := New(context.Background(), cfg, Options{Stdout: io.Discard, LogOutput: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			blocked, busy := ours(before)
			if started := append(blocked, busy...); len(started) > 0 {
				t.Errorf("New started %d goroutines of the service:\n\n%s", len(started), strings.Join(started, "\n\n"))
			}
		})
	}
}

// TestRunStoppedAtOnce: a Run whose context ends before it serves (a
// SIGTERM as the server starts, while it recovers calls) stops without
// an error, and closes the store.
func TestRunStoppedAtOnce(t *testing.T) {
	a, err := New(context.Background(), testConfig(t, t.TempDir()), Options{Stdout: io.Discard, LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	db, err := a.Store.DB().DB()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Ping(); err == nil {
		t.Error("the store is open after Run returned")
	}
}

// TestCloseWithoutRun is how tests use an App: built, used through its
// handler, closed. Close too ends what New started.
func TestCloseWithoutRun(t *testing.T) {
	a, err := New(context.Background(), testConfig(t, t.TempDir()), Options{Stdout: io.Discard, LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	left := leftAtStoreClose(a, func() {})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if len(*left) > 0 {
		t.Errorf("%d goroutines of the service were left when the store closed:\n\n%s", len(*left), strings.Join(*left, "\n\n"))
	}
	if err := a.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}
