package web_test

import (
	"testing"
)

// TestHungToolRunsOnce is issue 39's hung read-only tool: retryable, with
// retries to spare, it runs past its timeout. It runs once, not three
// times (holding its queue slot for three timeouts), and its answer
// agrees: TIMEOUT, not retryable, one attempt. Only a tool that says its
// timeouts pass (execution.retryTimeouts) is tried again. The runs are
// counted on the host, in runs.log of the session's work directory.
func TestHungToolRunsOnce(t *testing.T) {
	app := newTestApp(t)
	needSandbox(t, app)
	for _, tc := range []struct {
		name          string
		execution     map[string]any
		wantRuns      int
		wantRetryable bool
	}{
		{"hung_lookup", map[string]any{"timeout": 500, "retryable": true, "maxRetries": 2}, 1, false},
		{"flaky_lookup", map[string]any{"timeout": 500, "retryable": true, "maxRetries": 1, "retryTimeouts": true}, 2, true},
	} {
		def := countingTool(tc.name, "30", func(m map[string]any) { m["execution"] = tc.execution })
		if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
			t.Fatalf("register %s: %d %s", tc.name, r.Status, r.Body)
		}
		code, res := app.call(t, "admin", map[string]any{"tool": tc.name, "session_id": "hang", "arguments": map[string]any{"tag": tc.name}})
		e, _ := res["error"].(map[string]any)
		if code != 200 || errCode(res) != "TIMEOUT" || e["retryable"] != tc.wantRetryable ||
			res["metadata"].(map[string]any)["attempts"] != float64(tc.wantRuns) {
			t.Fatalf("%s: %d %v", tc.name, code, res)
		}
		if n := runs(t, []*testApp{app}, tc.name); n != tc.wantRuns {
			t.Errorf("%s ran %d times, want %d", tc.name, n, tc.wantRuns)
		}
	}
}
