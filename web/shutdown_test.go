package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"toolbelt/internal/poll"
	"toolbelt/models"
)

// At a shutdown past its deadline, synchronous calls whose tool runs end
// interrupted, and those still waiting for a slot of their category's
// queue are answered and recorded as not run: refused UNAVAILABLE,
// retryable, never "the server stopped while this call ran". The host
// shows which tools ran.
func TestShutdownSyncCallsNotBegunDidNotRun(t *testing.T) {
	ta := newTestApp(t)
	needSandbox(t, ta)
	register(t, ta, countingTool("tally_slow", "30"))
	answers := make(chan map[string]any, 6)
	for i := range 6 { // the code category runs 4 at once
		go func() {
			_, res := ta.call(t, "admin", map[string]any{"tool": "tally_slow", "session_id": "sd", "arguments": map[string]any{"tag": fmt.Sprintf("sd-%d", i)}})
			answers <- res
		}()
	}
	poll.True(t, 20*time.Second, "four calls running and two waiting", func() bool {
		n := 0
		for i := range 6 {
			n += runs(t, []*testApp{ta}, fmt.Sprintf("sd-%d", i))
		}
		return n == 4 && gaugeOf(t, ta, "toolbelt_queue_waiting", "code") == 2
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	ta.invoker.Shutdown(ctx)
	got := map[string]int{}
	for range 6 {
		res := <-answers
		e, _ := res["error"].(map[string]any)
		rec, err := ta.store.CallByID(context.Background(), res["call_id"].(string))
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != res["status"] || rec.ErrorCode != e["code"] {
			t.Errorf("call %s answered %v %v, recorded %s %s", rec.ID, res["status"], e["code"], rec.Status, rec.ErrorCode)
		}
		switch res["status"] {
		case models.StatusRefused:
			if e["code"] != models.CodeUnavailable || e["retryable"] != true || !strings.Contains(e["message"].(string), "did not run") {
				t.Errorf("a call that waited for its slot: %v", res)
			}
		case models.StatusInterrupted:
		default:
			t.Errorf("after the shutdown: %v", res)
		}
		got[res["status"].(string)]++
	}
	if got[models.StatusInterrupted] != 4 || got[models.StatusRefused] != 2 {
		t.Errorf("after the shutdown: %v, want 4 interrupted and 2 refused", got)
	}
	n := 0
	for i := range 6 {
		n += runs(t, []*testApp{ta}, fmt.Sprintf("sd-%d", i))
	}
	if n != 4 {
		t.Errorf("%d tools ran, want the 4 interrupted", n)
	}
}
