package web_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"toolbelt/services/ops"
)

// A tool failing past the threshold raises an alert: flagged for the
// console and GET /stats, logged, set in the metric, posted to the
// webhook; when it recovers, the alert resolves the same ways.
func TestFailureRateAlert(t *testing.T) {
	var mu sync.Mutex
	var posted []ops.Alert
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a ops.Alert
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &a); err != nil || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("webhook body %s: %v", raw, err)
		}
		mu.Lock()
		posted = append(posted, a)
		mu.Unlock()
	}))
	defer hook.Close()
	app := newTestApp(t)
	metrics := ops.NewMetrics("")
	cfg := ops.AlertConfig{Window: 15 * time.Minute, Threshold: 0.5, MinCalls: 10, Webhook: hook.URL, Every: time.Hour}
	alerts := ops.NewAlerts(ops.AlertsDeps{Store: app.store, Config: cfg, Metrics: metrics, Log: discardLog()})
	ctx := context.Background()
	gauge := func() float64 {
		fams, _ := metrics.Registry.Gather()
		for _, f := range fams {
			if f.GetName() == "toolbelt_tool_failure_alert" {
				for _, m := range f.Metric {
					if m.Label[0].GetValue() == "file_read" {
						return m.Gauge.GetValue()
					}
				}
			}
		}
		return -1
	}
	read := func(path string) {
		app.call(t, "admin", map[string]any{"tool": "file_read", "session_id": "al", "arguments": map[string]any{"path": path}})
	}
	app.call(t, "admin", map[string]any{"tool": "file_write", "session_id": "al", "arguments": map[string]any{"path": "ok.txt", "content": "ok"}})

	// 9 failures: fewer calls than MinCalls, no alert.
	for range 9 {
		read("missing.txt")
	}
	app.invoker.Flush()
	if err := alerts.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if len(alerts.Firing()) != 0 {
		t.Fatalf("alert below the minimum of calls: %v", alerts.Firing())
	}

	app = newTestApp(t)
	metrics = ops.NewMetrics("")
	alerts = ops.NewAlerts(ops.AlertsDeps{Store: app.store, Config: cfg, Metrics: metrics, Log: discardLog()})
	app.call(t, "admin", map[string]any{"tool": "file_write", "session_id": "al", "arguments": map[string]any{"path": "ok.txt", "content": "ok"}})
	for range 12 {
		read("missing.txt")
	}
	for range 3 {
		read("ok.txt")
	}
	app.invoker.Flush()
	if err := alerts.Check(ctx); err != nil {
		t.Fatal(err)
	}
	firing := alerts.Firing()
	if len(firing) != 1 || firing[0].Tool != "file_read" || firing[0].Failed != 12 || firing[0].Calls < 15 {
		t.Fatalf("firing %+v", firing)
	}
	if gauge() != 1 {
		t.Errorf("metric %v, want 1", gauge())
	}
	mu.Lock()
	if len(posted) != 1 || posted[0].Status != "firing" || posted[0].Tool != "file_read" {
		t.Errorf("webhook got %+v", posted)
	}
	mu.Unlock()

	// The app's own monitor (default configuration) shows it in the API and
	// on the dashboard.
	if err := app.alerts.Check(ctx); err != nil {
		t.Fatal(err)
	}
	r := app.do(t, "reviewer", "GET", "/api/v1/stats?hours=1", nil)
	body := r.JSON(t)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"alerts":[{"tool":"file_read","status":"firing"`) {
		t.Fatalf("stats: %d %s", r.Status, r.Body)
	}
	if body["calls"].(float64) != 16 {
		t.Errorf("stats calls %v, want 16", body["calls"])
	}
	if p := signedIn(t, app, "admin").get("/admin"); p.TestID("alert-file_read").Length() != 1 {
		t.Error("the dashboard does not flag the alert")
	}
	if !strings.Contains(app.logs.String(), "tool failure rate alert") {
		t.Error("the alert was not logged")
	}

	// Successes bring it back under the threshold: resolved.
	for range 20 {
		read("ok.txt")
	}
	app.invoker.Flush()
	if err := alerts.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if len(alerts.Firing()) != 0 || gauge() != 0 {
		t.Fatalf("not resolved: %v, metric %v", alerts.Firing(), gauge())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posted) != 2 || posted[1].Status != "resolved" {
		t.Errorf("webhook got %+v", posted)
	}

	// Bad input to the API.
	if r := app.do(t, "admin", "GET", "/api/v1/stats?hours=0", nil); r.Status != 400 || !strings.Contains(string(r.Body), "hours must be between 1 and 168") {
		t.Errorf("hours=0: %d %s", r.Status, r.Body)
	}
	for query, want := range map[string]string{
		"top=x":   `top=\"x\" is not an integer`,
		"top=0":   "top must be between 1 and 100",
		"top=101": "top must be between 1 and 100",
		"days=2":  `unknown query parameter \"days\"`,
	} {
		if r := app.do(t, "admin", "GET", "/api/v1/stats?"+query, nil); r.Status != 400 || !strings.Contains(string(r.Body), want) {
			t.Errorf("%s: %d %s", query, r.Status, r.Body)
		}
	}
	if r := app.do(t, "admin", "GET", "/api/v1/stats?top=1", nil); r.Status != 200 || len(r.JSON(t)["top"].([]any)) > 1 {
		t.Errorf("top=1: %d %s", r.Status, r.Body)
	}
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
