package web_test

import (
	"testing"
)

// TestHungToolRunsOnce is issue 39's hung read-only tool: retryable, with
// retries to spare, it runs past its timeout. It runs once, not three
// times (holding its queue slot for three timeouts), and its answer
// agrees: TIMEOUT, not retryable, one attempt. The runs are counted on the
// host, in runs.log of the session's work directory.
func TestHungToolRunsOnce(t *testing.T) {
	app := newTestApp(t)
	needSandbox(t, app)
	def := countingTool("hung_lookup", "30", func(m map[string]any) {
		m["execution"] = map[string]any{"timeout": 500, "retryable": true, "maxRetries": 2}
	})
	if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	code, res := app.call(t, "admin", map[string]any{"tool": "hung_lookup", "session_id": "hang", "arguments": map[string]any{"tag": "hung"}})
	e, _ := res["error"].(map[string]any)
	if code != 200 || errCode(res) != "TIMEOUT" || e["retryable"] != false || res["metadata"].(map[string]any)["attempts"] != float64(1) {
		t.Fatalf("hung call: %d %v", code, res)
	}
	if n := runs(t, []*testApp{app}, "hung"); n != 1 {
		t.Errorf("the hung tool ran %d times, want once", n)
	}
}
