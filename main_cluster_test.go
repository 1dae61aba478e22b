package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/poll"
	"toolbelt/models"
)

// TestLeaderKilledHandsOver runs two instances of the real binary over one
// Postgres database: one leads; SIGKILL it, and Postgres, ending its
// session, frees the leader lock for the other within seconds. Each
// instance's metrics carry its name.
func TestLeaderKilledHandsOver(t *testing.T) {
	bin := buildBinary(t)
	db := dbtest.Postgres(t)
	const key = testAdminKey
	servers := map[string]*server{}
	for _, name := range []string{"a", "b"} {
		servers[name] = start(t, bin, t.TempDir(), "TOOLBELT_DATABASE_URL="+db, "TOOLBELT_INSTANCE="+name, "TOOLBELT_ADMIN_KEY="+key)
	}
	role := func(s *server) string {
		_, body := s.get(t, "/readyz", "")
		r, _ := body["role"].(string)
		return r
	}
	// leaderOf polls until exactly one of names leads.
	leaderOf := func(names ...string) string {
		var leading []string
		poll.Until(t, 10*time.Second, "exactly one instance leads", func() (bool, string) {
			leading = nil
			for _, n := range names {
				if role(servers[n]) == "leader" {
					leading = append(leading, n)
				}
			}
			if len(leading) > 1 {
				t.Fatalf("instances leading: %v", leading)
			}
			return len(leading) == 1, fmt.Sprintf("instances leading: %v", leading)
		})
		return leading[0]
	}
	leader := leaderOf("a", "b")
	follower := map[string]string{"a": "b", "b": "a"}[leader]
	if got := role(servers[follower]); got != "follower" {
		t.Fatalf("instance %s is %q, want follower", follower, got)
	}
	req, _ := http.NewRequest("GET", servers[follower].base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `toolbelt_leader{instance="` + follower + `"} 0`; !strings.Contains(string(metrics), want) {
		t.Errorf("/metrics of %s lacks %s", follower, want)
	}

	killed := time.Now()
	if err := servers[leader].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if next := leaderOf(follower); next != follower {
		t.Fatalf("%s leads", next)
	}
	took := time.Since(killed)
	t.Logf("instance %s leads %s after %s was killed", follower, took.Round(time.Millisecond), leader)
	if took > 5*time.Second {
		t.Errorf("the new leader took %s", took)
	}
}

// clusterCall is a call a cluster acknowledged: what it was and the tag
// its run writes.
type clusterCall struct {
	id, tag, kind string
	on            string // the instance that answered it
}

// TestClusterOfThreeKilledMidTraffic runs three instances of the real
// binary over one Postgres database and one Redis server, sends them mixed
// traffic round-robin (sync and async calls, approvals decided on another
// instance than the one called, cancels, polls and event streams through
// another instance), SIGKILLs one mid-traffic and restarts it, and checks
// that nothing acknowledged was lost or done twice: every acknowledged
// call ends, a succeeded one ran exactly once, and no run of any call,
// acknowledged or not, happened twice. Runs are counted on the host: the
// tool appends its tag to a file in the work directory of the instance
// that runs it.
func TestClusterOfThreeKilledMidTraffic(t *testing.T) {
	bin := buildBinary(t)
	db, redisURL := dbtest.Postgres(t), dbtest.Redis(t)
	const key = testAdminKey
	tmp := sandboxTraversable(t)
	names := []string{"a", "b", "c"}
	dirs := map[string]string{}
	env := func(name string) []string {
		return []string{"TOOLBELT_DATABASE_URL=" + db, "TOOLBELT_REDIS_URL=" + redisURL, "TOOLBELT_INSTANCE=" + name, "TOOLBELT_ADMIN_KEY=" + key}
	}
	var mu sync.Mutex // guards clients (an instance restarts on a new port)
	clients := map[string]*faultClient{}
	servers := map[string]*server{}
	for _, n := range names {
		dirs[n] = filepath.Join(tmp, n)
		servers[n] = start(t, bin, dirs[n], env(n)...)
		clients[n] = newFaultClient(servers[n].base)
	}
	client := func(n string) *faultClient {
		mu.Lock()
		defer mu.Unlock()
		return clients[n]
	}
	a := client("a")
	mustDo := func(method, path, k string, body any, want int) map[string]any {
		t.Helper()
		code, res, err := a.do(method, path, k, body)
		if err != nil || code != want {
			t.Fatalf("%s %s: %d %v %v", method, path, code, res, err)
		}
		return res
	}
	reviewer := mustDo("POST", "/api/v1/principals", key, map[string]any{"name": "reviewer", "role": "reviewer"}, 201)["key"].(string)
	tool := func(name, seconds string, confirm bool) map[string]any {
		return map[string]any{
			"name": name, "version": "1.0.0", "category": "code",
			"description": "Record one run of a tagged job, then wait. Input: tag. Output: nothing.",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"tag": map[string]any{"type": "string"}},
				"required": []any{"tag"}, "additionalProperties": false},
			"security":  map[string]any{"level": "moderate", "sandbox": true, "requireConfirm": confirm},
			"execution": map[string]any{"timeout": 60000},
			"runner": map[string]any{"kind": "command", "argv": []any{"sh", "-c", `echo "$0" >> runs.log; sleep ` + seconds, "{{tag}}"},
				"runsArgumentAsCode": true},
		}
	}
	mustDo("POST", "/api/v1/tools", key, tool("tally", "0.1", false), 201)
	mustDo("POST", "/api/v1/tools", key, tool("tally_slow", "2", false), 201)
	mustDo("POST", "/api/v1/tools", key, tool("tally_approved", "0.1", true), 201)
	// Every instance knows the tools (catalog notices) before traffic.
	for _, n := range names {
		poll.Until(t, 10*time.Second, "instance "+n+" knows the tools", func() (bool, string) {
			code, _, err := client(n).do("GET", "/api/v1/tools/tally_approved", key, nil)
			return err == nil && code == 200, fmt.Sprint(code, err)
		})
	}

	var (
		ackMu   sync.Mutex
		acked   []clusterCall
		down    atomic.Value // the instance killed, "" when all run
		counter atomic.Int64
		streams atomic.Int64
	)
	down.Store("")
	ack := func(c clusterCall) { ackMu.Lock(); acked = append(acked, c); ackMu.Unlock() }
	// pick returns the i-th live instance after from, round-robin.
	pick := func(i int64) string {
		for {
			n := names[i%int64(len(names))]
			if n != down.Load().(string) {
				return n
			}
			i++
		}
	}
	call := func(on string, body map[string]any) (int, map[string]any, error) {
		return client(on).do("POST", "/api/v1/calls", key, body)
	}
	// One operation of the traffic; requests that break (the instance was
	// killed under them) acknowledge nothing.
	op := func() {
		i := counter.Add(1)
		on, other := pick(i), pick(i+1)
		if other == on { // one instance down: the next live one
			other = pick(i + 2)
		}
		tag := fmt.Sprintf("t%05d", i)
		switch i % 6 {
		case 0: // sync
			if code, res, err := call(on, map[string]any{"tool": "tally", "session_id": "s", "arguments": map[string]any{"tag": tag}}); err == nil && code == 200 {
				if res["status"] != "succeeded" {
					t.Errorf("sync call on %s: %v", on, res)
				}
				ack(clusterCall{res["call_id"].(string), tag, "sync", on})
			}
		case 1, 2: // async, quick or slow
			name := map[int64]string{1: "tally", 2: "tally_slow"}[i%6]
			if code, res, err := call(on, map[string]any{"tool": name, "async": true, "session_id": "s", "arguments": map[string]any{"tag": tag}}); err == nil && code == 202 {
				ack(clusterCall{res["call_id"].(string), tag, "async", on})
			}
		case 3: // approved on another instance
			code, res, err := call(on, map[string]any{"tool": "tally_approved", "session_id": "s", "arguments": map[string]any{"tag": tag}})
			if err != nil || code != 202 {
				return
			}
			ack(clusterCall{res["call_id"].(string), tag, "approval", on})
			approval := res["data"].(map[string]any)["approval_id"].(string)
			for try := int64(1); try <= 3; try++ { // the other may be killed meanwhile
				code, res, err := client(pick(i+try)).do("POST", "/api/v1/approvals/"+approval+"/approve", reviewer, map[string]any{"reason": "ok"})
				if err == nil {
					if code != 200 && code != 409 {
						t.Errorf("approve %s: %d %v", approval, code, res)
					}
					break
				}
			}
		case 4: // cancelled through another instance
			code, res, err := call(on, map[string]any{"tool": "tally_slow", "async": true, "session_id": "s", "arguments": map[string]any{"tag": tag}})
			if err != nil || code != 202 {
				return
			}
			id := res["call_id"].(string)
			ack(clusterCall{id, tag, "cancel", on})
			time.Sleep(300 * time.Millisecond)
			if code, res, err := client(other).do("DELETE", "/api/v1/calls/"+id, key, nil); err == nil && code != 202 && code != 409 {
				t.Errorf("cancel %s on %s: %d %v", id, other, code, res)
			}
		case 5: // streamed through another instance
			code, res, err := call(on, map[string]any{"tool": "tally", "async": true, "session_id": "s", "arguments": map[string]any{"tag": tag}})
			if err != nil || code != 202 {
				return
			}
			id := res["call_id"].(string)
			ack(clusterCall{id, tag, "stream", on})
			req, _ := http.NewRequest("GET", client(other).base+"/api/v1/calls/"+id+"/events", nil)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := client(other).hc.Do(req)
			if err != nil {
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == 200 {
				if !strings.Contains(string(body), "event: result") {
					t.Errorf("stream of %s on %s ended without its result:\n%s", id, other, body)
				}
				streams.Add(1)
			}
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					op()
				}
			}
		})
	}

	// Mid-traffic, SIGKILL b while it runs calls.
	store, err := models.OpenPostgres(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	runningOn := func(n string) int64 {
		var k int64
		store.DB().Model(&models.Call{}).Where("status = ? AND claimed_by LIKE ?", models.StatusRunning, n+"#%").Count(&k)
		return k
	}
	deadline := time.Now().Add(30 * time.Second)
	for runningOn("b") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	held := runningOn("b")
	if held == 0 {
		t.Fatal("b runs no call to be killed under")
	}
	down.Store("b")
	killed := time.Now()
	if err := servers["b"].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "b's calls taken over after its kill", func() (bool, string) {
		n := runningOn("b")
		return n == 0, fmt.Sprintf("%d running", n)
	})
	took := time.Since(killed)
	t.Logf("the %d calls b ran when it was killed were taken over %s after the kill", held, took.Round(time.Millisecond))

	// b comes back on its data directory and takes traffic again.
	servers["b"] = start(t, bin, dirs["b"], env("b")...)
	mu.Lock()
	clients["b"] = newFaultClient(servers["b"].base)
	mu.Unlock()
	down.Store("")
	time.Sleep(3 * time.Second) // traffic on all three again
	close(stop)
	wg.Wait()

	// Every acknowledged call ends, whichever instance is asked.
	final := map[string]bool{"succeeded": true, "failed": true, "interrupted": true}
	statuses := map[string]string{}
	for i, c := range acked {
		asked := names[i%len(names)]
		deadline := time.Now().Add(60 * time.Second)
		for {
			code, rec, err := client(asked).do("GET", "/api/v1/calls/"+c.id, key, nil)
			if err == nil && code == 200 && final[rec["status"].(string)] {
				statuses[c.id] = rec["status"].(string)
				if rec["status"] == "failed" && rec["error_code"] != "CANCELLED" {
					t.Errorf("%s call %s (tag %s, on %s) failed: %v", c.kind, c.id, c.tag, c.on, rec["error_code"])
				}
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s call %s (tag %s, on %s) lost or not ended: %d %v %v", c.kind, c.id, c.tag, c.on, code, rec, err)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Runs, counted on the host in every instance's work directories.
	count := map[string]int{}
	for _, dir := range dirs {
		_ = filepath.WalkDir(filepath.Join(dir, "sessions"), func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && d.Name() == "runs.log" {
				raw, _ := os.ReadFile(path)
				for _, line := range strings.Fields(string(raw)) {
					count[line]++
				}
			}
			return nil
		})
	}
	for tag, n := range count {
		if n > 1 {
			t.Errorf("tag %s ran %d times", tag, n)
		}
	}
	byStatus := map[string]int{}
	for _, c := range acked {
		s := statuses[c.id]
		byStatus[c.kind+" "+s]++
		if s == "succeeded" && count[c.tag] != 1 {
			t.Errorf("%s call %s (tag %s, on %s) succeeded having run %d times", c.kind, c.id, c.tag, c.on, count[c.tag])
		}
		if c.kind == "sync" && s != "succeeded" {
			t.Errorf("sync call %s answered succeeded is %s", c.id, s)
		}
	}
	t.Logf("%d calls acknowledged, %d streams read through another instance; by kind and end: %v", len(acked), streams.Load(), byStatus)
}
