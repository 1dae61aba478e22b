package web_test

import (
	"bytes"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetrics drives calls, a cache hit, a refusal, a selection and a
// pending approval, then reads /metrics with Prometheus' own parser.
func TestMetrics(t *testing.T) {
	app := newTestApp(t)
	dangerousWrite(t, app)
	write := map[string]any{"tool": "file_write", "session_id": "m", "arguments": map[string]any{"path": "a.txt", "content": "hi"}}
	read := map[string]any{"tool": "file_read", "session_id": "m", "arguments": map[string]any{"path": "a.txt"}}
	if code, res := app.call(t, "admin", write); code != 200 {
		t.Fatalf("write: %d %v", code, res)
	}
	for range 3 { // one miss, two hits
		if code, res := app.call(t, "admin", read); code != 200 {
			t.Fatalf("read: %d %v", code, res)
		}
	}
	app.call(t, "admin", map[string]any{"tool": "file_read", "session_id": "m", "arguments": map[string]any{"path": "../etc/passwd"}})
	app.call(t, "admin", map[string]any{"tool": "no_such_tool_made_up", "arguments": map[string]any{}})
	if r := app.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "overwrite_note", "session_id": "m", "arguments": map[string]any{"path": "n", "content": "x"}}); r.Status != 202 {
		t.Fatalf("dangerous call: %d %s", r.Status, r.Body)
	}
	if r := app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": "read a file", "session_id": "m"}); r.Status != 200 {
		t.Fatalf("select: %d %s", r.Status, r.Body)
	}

	for _, method := range []string{"BREW", "PROPFIND"} { // made-up methods share one label
		if r := app.do(t, "admin", method, "/api/v1/tools", nil); r.Status < 400 {
			t.Fatalf("%s: %d", method, r.Status)
		}
	}
	for role, want := range map[string]int{"none": 401, "agent": 403, "reviewer": 403} {
		if r := app.do(t, role, "GET", "/metrics", nil); r.Status != want {
			t.Errorf("%s: /metrics %d, want %d", role, r.Status, want)
		}
	}
	r := app.do(t, "admin", "GET", "/metrics", nil)
	if r.Status != 200 {
		t.Fatalf("metrics: %d %s", r.Status, r.Body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(r.Body))
	if err != nil {
		t.Fatalf("Prometheus cannot parse /metrics: %v", err)
	}
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		f, ok := families[name]
		if !ok {
			t.Fatalf("no metric %s", name)
		}
		for _, m := range f.Metric {
			if matches(m, labels) {
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				case m.Histogram != nil:
					return float64(m.Histogram.GetSampleCount())
				}
			}
		}
		return 0
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"toolbelt_calls_total", map[string]string{"tool": "file_read", "status": "succeeded"}, 3},
		{"toolbelt_calls_total", map[string]string{"tool": "file_read", "status": "refused"}, 1},
		{"toolbelt_calls_total", map[string]string{"tool": "unknown", "status": "refused"}, 1},
		{"toolbelt_calls_total", map[string]string{"tool": "overwrite_note", "status": "awaiting_approval"}, 1},
		{"toolbelt_call_duration_seconds", map[string]string{"tool": "file_read"}, 4},
		{"toolbelt_cache_lookups_total", map[string]string{"result": "hit"}, 2},
		{"toolbelt_cache_lookups_total", map[string]string{"result": "miss"}, 1},
		{"toolbelt_guard_duration_seconds", map[string]string{"guard": "resolve"}, 7},
		{"toolbelt_guard_duration_seconds", map[string]string{"guard": "cache"}, 4},
		{"toolbelt_approvals_pending", nil, 1},
		{"toolbelt_selection_duration_seconds", nil, 1},
		{"toolbelt_http_requests_total", map[string]string{"route": "/api/v1/calls", "method": "POST", "status": "200"}, 4},
		{"toolbelt_http_requests_total", map[string]string{"route": "/metrics", "method": "GET", "status": "403"}, 2},
	}
	for _, c := range checks {
		if got := value(c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if _, ok := families["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}
	if bytes.Contains(r.Body, []byte("BREW")) || value("toolbelt_http_requests_total", map[string]string{"method": "other"}) != 2 {
		t.Error("made-up HTTP methods are not reported as method=\"other\"")
	}
	if bytes.Contains(r.Body, []byte("no_such_tool_made_up")) {
		t.Error("a made-up tool name became a label")
	}
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, l := range m.Label {
		if v, ok := labels[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}
