package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolbelt/app"
	"toolbelt/internal/poll"
	"toolbelt/models"
)

// countingTool is a command tool that appends its tag to runs.log in the
// session's work directory and then sleeps seconds: every run of it is
// counted on the host, in the data directory of the instance that ran it.
func countingTool(name, seconds string, edits ...func(map[string]any)) map[string]any {
	return toolDef(name, append([]func(map[string]any){func(m map[string]any) {
		m["description"] = "Record one run of a tagged job, then wait. Input: tag. Output: nothing."
		m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{"tag": map[string]any{"type": "string"}},
			"required": []any{"tag"}, "additionalProperties": false}
		m["execution"] = map[string]any{"timeout": 60000}
		// The tag reaches a shell script: code, which is not safe (issue 39).
		m["security"].(map[string]any)["level"] = "moderate"
		m["runner"] = map[string]any{"kind": "command", "argv": []any{"sh", "-c", `echo "$0" >> runs.log; sleep ` + seconds, "{{tag}}"},
			"runsArgumentAsCode": true}
	}}, edits...)...)
}

// runs counts the runs of tag recorded by countingTool on every instance.
func runs(t *testing.T, apps []*testApp, tag string) int {
	t.Helper()
	n := 0
	for _, a := range apps {
		_ = filepath.WalkDir(filepath.Join(filepath.Dir(a.dbPath), "sessions"), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "runs.log" {
				return nil
			}
			raw, _ := os.ReadFile(path)
			for line := range strings.SplitSeq(string(raw), "\n") {
				if line == tag {
					n++
				}
			}
			return nil
		})
	}
	return n
}

// runLogs is what countingTool wrote on every instance, for a failure.
func runLogs(apps []*testApp) string {
	var b strings.Builder
	for i, a := range apps {
		_ = filepath.WalkDir(filepath.Join(filepath.Dir(a.dbPath), "sessions"), func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && d.Name() == "runs.log" {
				raw, _ := os.ReadFile(path)
				fmt.Fprintf(&b, "instance %d %s:\n%s\n", i, path, raw)
			}
			return nil
		})
	}
	return b.String()
}

// register registers defs on a, and lets the agent call them.
func register(t *testing.T, a *testApp, defs ...map[string]any) {
	t.Helper()
	for _, def := range defs {
		if r := a.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
			t.Fatal(string(r.Body))
		}
	}
	if r := a.do(t, "admin", "PUT", fmt.Sprintf("/api/v1/principals/%d/grants", a.ids["agent"]), map[string]any{"categories": []string{"code"}}); r.Status != 200 {
		t.Fatal(r.Status, string(r.Body))
	}
}

// stream opens a call's event stream on a and returns what it sent once
// it ends (its result event, or the deadline).
func stream(t *testing.T, a *testApp, role, id string) <-chan string {
	t.Helper()
	out := make(chan string, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	req := httptest.NewRequestWithContext(ctx, "GET", "/api/v1/calls/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+a.keys[role])
	go func() {
		defer cancel()
		rec := httptest.NewRecorder()
		a.handler.ServeHTTP(rec, req)
		out <- rec.Body.String()
	}()
	return out
}

// Calls are one: a call made on one instance is polled, streamed,
// cancelled and approved through the others, over Redis pub/sub or,
// without Redis, Postgres LISTEN/NOTIFY; an approval decided on two
// instances at once runs its call once.
func TestClusterCallsAreOne(t *testing.T) {
	for _, redis := range []bool{true, false} {
		t.Run(map[bool]string{true: "redis", false: "postgres"}[redis], func(t *testing.T) {
			apps := newCluster(t, 3, redis)
			a, b, c := apps[0], apps[1], apps[2]
			register(t, a, countingTool("tally", "0"), countingTool("tally_slow", "30"),
				countingTool("tally_approved", "0", func(m map[string]any) { m["security"].(map[string]any)["requireConfirm"] = true }))

			// Streamed on B while it waits for approval, approved on C (and
			// on A at the same moment): run once, its events on B through
			// to the result, polled on A.
			r := a.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "tally_approved", "session_id": "one", "arguments": map[string]any{"tag": "approved"}})
			parked := r.JSON(t)
			if r.Status != 202 || parked["status"] != "awaiting_approval" {
				t.Fatalf("parked: %d %s", r.Status, r.Body)
			}
			id := parked["call_id"].(string)
			approval := parked["data"].(map[string]any)["approval_id"].(string)
			events := stream(t, b, "agent", id)
			poll.True(t, 20*time.Second, "the stream on B heard of by A and C", func() bool {
				return a.invoker.Streamed(id) && c.invoker.Streamed(id)
			})
			codes := make([]int, 2)
			var wg sync.WaitGroup
			for i, on := range []*testApp{c, a} {
				wg.Go(func() {
					codes[i] = on.do(t, "reviewer", "POST", "/api/v1/approvals/"+approval+"/approve", map[string]any{"reason": "ok"}).Status
				})
			}
			wg.Wait()
			if fmt.Sprint(codes) != "[200 409]" && fmt.Sprint(codes) != "[409 200]" {
				t.Fatalf("one approval decided on two instances: %v", codes)
			}
			got := <-events
			if !strings.Contains(got, "event: attempt") || !strings.Contains(got, "event: result\ndata: {") || !strings.Contains(got, `"status":"succeeded"`) {
				t.Errorf("the stream on B of a call run elsewhere:\n%s", got)
			}
			if rec := a.poll(t, "agent", id); rec["status"] != "succeeded" {
				t.Errorf("the approved call polled on A: %v", rec)
			}
			if n := runs(t, apps, "approved"); n != 1 {
				t.Errorf("the approved call ran %d times", n)
			}

			// An async call made on A, running somewhere, is cancelled
			// through B and seen cancelled on C.
			r = a.do(t, "admin", "POST", "/api/v1/calls", map[string]any{"tool": "tally_slow", "async": true, "session_id": "one", "arguments": map[string]any{"tag": "slow"}})
			if r.Status != 202 {
				t.Fatalf("async: %d %s", r.Status, r.Body)
			}
			id = r.JSON(t)["call_id"].(string)
			poll.True(t, 20*time.Second, "the slow call running", func() bool { return runs(t, apps, "slow") == 1 })
			if r := b.do(t, "admin", "DELETE", "/api/v1/calls/"+id, nil); r.Status != 202 {
				t.Fatalf("cancel on B: %d %s", r.Status, r.Body)
			}
			if rec := c.poll(t, "admin", id); rec["status"] != "failed" || rec["error_code"] != "CANCELLED" {
				t.Errorf("cancelled through B, seen on C: %v", rec)
			}
			if r := c.do(t, "admin", "DELETE", "/api/v1/calls/"+id, nil); r.Status != 409 {
				t.Errorf("cancel of an ended call: %d", r.Status)
			}

			// A queued call that no instance claimed yet is cancelled in
			// the store (or, if one just claimed it, by its owner).
			req, _ := json.Marshal(map[string]any{"tool": "tally_slow", "session_id": "one", "arguments": map[string]any{"tag": "queued"}})
			queued := &models.Call{ID: "queuedcall000001", PrincipalID: 1, SessionID: "one", Tool: "tally_slow", Status: models.StatusQueued,
				Request: string(req), Arguments: "{}", Result: "{}", CreatedAt: time.Now().UTC()}
			if err := a.store.SaveCalls(context.Background(), []*models.Call{queued}); err != nil {
				t.Fatal(err)
			}
			if r := b.do(t, "admin", "DELETE", "/api/v1/calls/"+queued.ID, nil); r.Status != 202 {
				t.Fatalf("cancel of a queued call: %d %s", r.Status, r.Body)
			}
			if rec := c.poll(t, "admin", queued.ID); rec["status"] != "failed" || rec["error_code"] != "CANCELLED" {
				t.Errorf("the queued call cancelled: %v", rec)
			}

			// Async calls made round-robin run once each, polled and
			// streamed anywhere.
			var ids []string
			for i := range 9 {
				on := apps[i%3]
				r := on.do(t, "admin", "POST", "/api/v1/calls", map[string]any{"tool": "tally", "async": true, "session_id": "one", "arguments": map[string]any{"tag": fmt.Sprintf("rr-%d", i)}})
				if r.Status != 202 {
					t.Fatalf("async %d: %d %s", i, r.Status, r.Body)
				}
				ids = append(ids, r.JSON(t)["call_id"].(string))
			}
			for i, id := range ids {
				got := <-stream(t, apps[(i+1)%3], "admin", id)
				if !strings.Contains(got, "event: result") || !strings.Contains(got, `"succeeded"`) {
					t.Errorf("stream of call %d: %s", i, got)
				}
				if rec := apps[(i+2)%3].poll(t, "admin", id); rec["status"] != "succeeded" {
					t.Errorf("call %d: %v", i, rec)
				}
				if n := runs(t, apps, fmt.Sprintf("rr-%d", i)); n != 1 {
					rec, _ := a.store.CallByID(context.Background(), id)
					t.Errorf("call %d ran %d times: %+v\n%s", i, n, rec, runLogs(apps))
				}
			}
		})
	}
}

// When an instance dies, the others take its calls over once its claims
// lapse: a call whose tool had not begun runs once elsewhere (an approved
// one with its approval), one whose tool had begun ends interrupted and
// is not run again.
func TestClusterTakesOverCalls(t *testing.T) {
	apps := newCluster(t, 3, true)
	a := apps[0]
	register(t, a, countingTool("tally", "0"),
		countingTool("tally_approved", "0", func(m map[string]any) { m["security"].(map[string]any)["requireConfirm"] = true }))
	ctx := context.Background()
	past := time.Now().Add(-time.Second)
	// As the dead instance "gone" left them: claimed, its lease lapsed.
	dead := func(id, tag string, started bool) {
		t.Helper()
		req, _ := json.Marshal(map[string]any{"tool": "tally", "session_id": "dead", "arguments": map[string]any{"tag": tag}})
		rec := &models.Call{ID: id, PrincipalID: 1, SessionID: "dead", Tool: "tally", Status: models.StatusQueued, Request: string(req),
			Arguments: "{}", Result: "{}", CreatedAt: time.Now().UTC()}
		if err := a.store.SaveCalls(ctx, []*models.Call{rec}); err != nil {
			t.Fatal(err)
		}
		if ok, err := a.store.ClaimCall(ctx, id, "gone#1", past, "{}"); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if started {
			if ok, err := a.store.StartCall(ctx, id, "gone#1", past); err != nil || !ok {
				t.Fatal(ok, err)
			}
		}
	}
	dead("deadunstarted001", "unstarted", false)
	dead("deadstarted00001", "started", true)
	// An approved call whose approval the dead run had consumed.
	r := a.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "tally_approved", "session_id": "dead", "arguments": map[string]any{"tag": "approved"}})
	parked := r.JSON(t)
	approvedID := parked["call_id"].(string)
	db := a.store.DB()
	db.Model(&models.Approval{}).Where("id = ?", parked["data"].(map[string]any)["approval_id"]).Update("status", models.ApprovalUsed)
	db.Model(&models.Call{}).Where("id = ?", approvedID).Update("status", models.StatusQueued)
	if ok, err := a.store.ClaimCall(ctx, approvedID, "gone#1", past, "{}"); err != nil || !ok {
		t.Fatal(ok, err)
	}

	for id, want := range map[string]string{"deadunstarted001": "succeeded", "deadstarted00001": "interrupted", approvedID: "succeeded"} {
		role := "admin"
		if id == approvedID {
			role = "agent"
		}
		if rec := apps[1].poll(t, role, id); rec["status"] != want {
			t.Errorf("call %s taken over: %v, want %s", id, rec, want)
		}
	}
	for tag, want := range map[string]int{"unstarted": 1, "started": 0, "approved": 1} {
		if n := runs(t, apps, tag); n != want {
			t.Errorf("%s ran %d times, want %d", tag, n, want)
		}
	}
	// Nothing runs twice later: every instance has looked again.
	time.Sleep(3 * time.Second)
	for tag, want := range map[string]int{"unstarted": 1, "approved": 1} {
		if n := runs(t, apps, tag); n != want {
			t.Errorf("%s ran %d times, want %d", tag, n, want)
		}
	}
	// Each takeover counted once, by whichever instance made it.
	taken := map[string]float64{}
	for _, a := range apps {
		families, err := a.app.Metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "toolbelt_calls_taken_over_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" {
						taken[l.GetValue()] += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	if fmt.Sprint(taken) != "map[interrupted:1 requeued:2]" {
		t.Errorf("takeovers counted: %v", taken)
	}
}

// Completion callbacks are delivered once per call whichever instance ran
// it: every instance delivers, each delivery claimed by one at a time.
func TestClusterCallbacksOnce(t *testing.T) {
	const key = "e8c12e896becfb5baa55727d1f26e9dcbcbc8408a3fc0e370b0d5a9406f161f8"
	apps := clusterApps(t, 3, true, loopback, fastCallbacks(5), func(c *app.Config) { c.CallbackKey = key })
	var scans []*atomic.Int64
	for _, a := range apps {
		scans = append(scans, callbackScans(t, a.store))
	}
	for _, a := range apps {
		a.serve(t) // they hear each other's change notices
	}
	register(t, apps[0], countingTool("tally", "0"))
	recv := newReceiver(t, 1)
	r := apps[0].do(t, "admin", "GET", "/api/v1/me/callback-secret", nil)
	recv.mu.Lock()
	recv.secret, _ = r.JSON(t)["secret"].(string)
	recv.mu.Unlock()
	var ids []string
	for i := range 12 {
		r := apps[i%3].do(t, "admin", "POST", "/api/v1/calls", map[string]any{"tool": "tally", "async": true, "session_id": "cb",
			"arguments": map[string]any{"tag": fmt.Sprintf("cb-%d", i)}, "callback_url": recv.srv.URL + "/hook?token=abc"})
		if r.Status != http.StatusAccepted {
			t.Fatalf("call %d: %d %s", i, r.Status, r.Body)
		}
		ids = append(ids, r.JSON(t)["call_id"].(string))
	}
	for i, id := range ids {
		_, cb := apps[(i+1)%3].callbackOf(t, "admin", id)
		if cb["state"] != "delivered" {
			t.Errorf("callback of call %d: %v", i, cb)
		}
	}
	moreScans(t, scans...) // later scans of every instance deliver nothing again
	for i, id := range ids {
		if seen, ok := recv.counts(id); seen != 2 || ok != 1 {
			t.Errorf("call %d: %d deliveries, %d answered 2xx; want 2 (the first refused) and 1", i, seen, ok)
		}
	}
}

// At a shutdown past its deadline, background calls whose tool runs end
// interrupted, and those still waiting for a slot of their category's
// queue (their tool never began) are queued again, for another instance
// or the next start, never lost or recorded as failed.
func TestShutdownReleasesCallsNotBegun(t *testing.T) {
	ta := newTestApp(t)
	register(t, ta, countingTool("tally_slow", "30"))
	var ids []string
	for i := range 6 { // the code category runs 4 at once
		r := ta.do(t, "admin", "POST", "/api/v1/calls", map[string]any{"tool": "tally_slow", "async": true, "session_id": "sd",
			"arguments": map[string]any{"tag": fmt.Sprintf("sd-%d", i)}})
		if r.Status != 202 {
			t.Fatal(r.Status, string(r.Body))
		}
		ids = append(ids, r.JSON(t)["call_id"].(string))
	}
	poll.True(t, 20*time.Second, "four calls running", func() bool {
		n := 0
		for i := range ids {
			n += runs(t, []*testApp{ta}, fmt.Sprintf("sd-%d", i))
		}
		return n == 4
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	ta.invoker.Shutdown(ctx)
	got := map[string]int{}
	for _, id := range ids {
		rec, err := ta.store.CallByID(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		got[rec.Status]++
		if rec.Status == models.StatusQueued && rec.ClaimedBy != "" {
			t.Errorf("call %s queued again still claimed by %s", id, rec.ClaimedBy)
		}
	}
	if got[models.StatusInterrupted] != 4 || got[models.StatusQueued] != 2 {
		t.Errorf("after the shutdown: %v, want 4 interrupted and 2 queued", got)
	}
}

// On Postgres an answer waits for its record's commit: there is no call
// journal, and a call answered by one instance is read at once by another.
func TestClusterAnswersWaitForTheCommit(t *testing.T) {
	apps := newCluster(t, 2, false)
	a, b := apps[0], apps[1]
	register(t, a, countingTool("tally", "0"))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 5 {
				body := map[string]any{"tool": "tally", "session_id": "commit", "arguments": map[string]any{"tag": fmt.Sprintf("c-%d-%d", i, j)}}
				async := j%2 == 1
				body["async"] = async
				code, res := a.call(t, "admin", body)
				if code != 200 && code != 202 {
					t.Errorf("call: %d %v", code, res)
					return
				}
				rec, err := b.store.CallByID(context.Background(), res["call_id"].(string))
				if err != nil {
					t.Errorf("call %v answered %d by A is not in the database: %v", res["call_id"], code, err)
					return
				}
				if !async && rec.Status != "succeeded" {
					t.Errorf("a sync call answered succeeded is recorded %s", rec.Status)
				}
			}
		})
	}
	wg.Wait()
	// The journal only spools on Postgres: nothing was written to it.
	segs, _ := filepath.Glob(filepath.Join(filepath.Dir(a.dbPath), "journal", "*.jsonl"))
	for _, seg := range segs {
		if st, err := os.Stat(seg); err == nil && st.Size() > 0 {
			t.Errorf("answers were journaled on Postgres: %s holds %d bytes", seg, st.Size())
		}
	}
}
