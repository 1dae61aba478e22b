package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/poll"
	"toolbelt/models"
)

// The fault suite (issue 27): for each fault, a mixed load (tool
// registrations, selections, sync and async calls, approvals decided on
// another instance, a rate-limited agent) runs against three instances of
// the real binary over one Postgres and one Redis (one instance on SQLite
// for the full disk); the fault is injected mid-load; then, from the
// outside, every acknowledged call is looked up with its real result, the
// tools' runs are counted on the host, the logs are searched for
// deadlocks and the limit is counted. Each fault reports the calls
// acknowledged, lost, duplicated, the error rate while it lasted and the
// seconds to recover (docs/operations.md quotes them).
//
// The tools write their tag to runs.log in the session's work directory
// when they begin and to done.log when they end, so the host knows which
// calls ran, how often, and which finished.

// faultTool is a sandboxed command that records one run of a tag.
func faultTool(name, seconds string, confirm bool, limit int) map[string]any {
	security := map[string]any{"level": "moderate", "sandbox": true, "requireConfirm": confirm}
	if limit > 0 {
		security["rateLimit"] = map[string]any{"maxCalls": limit, "windowMs": 60000}
	}
	return map[string]any{
		"name": name, "version": "1.0.0", "category": "code",
		"description": "Record one run of a tagged job, then wait. Input: tag. Output: the tag.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"tag": map[string]any{"type": "string"}},
			"required": []any{"tag"}, "additionalProperties": false},
		"security":  security,
		"execution": map[string]any{"timeout": 60000},
		"runner": map[string]any{"kind": "command", "argv": []any{"sh", "-c",
			`echo "$0" >> runs.log; sleep ` + seconds + `; echo "$0" >> done.log; echo "$0"`, "{{tag}}"}, "runsArgumentAsCode": true},
	}
}

// faultLimit is the rate-limited tool's calls per minute.
const faultLimit = 30

// faultCall is a call an instance acknowledged.
type faultCall struct {
	id, tag, kind, on string
}

// faultRig is a deployment under load, and what the load saw.
type faultRig struct {
	t       *testing.T
	bin     string
	names   []string
	dirs    map[string]string
	env     func(name string) []string
	pg      *dbtest.PGServer
	redis   *dbtest.RedisProc
	key     string
	keys    map[string]string // reviewer, limited
	mu      sync.Mutex
	servers map[string]*server
	clients map[string]*faultClient
	down    map[string]bool // instances the load leaves alone (killed, frozen)
	logs    strings.Builder // the logs of instances' earlier runs
	store   *models.Store   // the instances' Postgres database, read by the test

	ackMu      sync.Mutex
	acked      []faultCall
	unrecorded []faultCall // answered NOT_RECORDED: ran, not kept
	tools      []string    // registrations acknowledged
	counter    atomic.Int64
	// requests made and failed (transport errors and 5xx), each with
	// its time, to measure the fault's error rate.
	reqs []faultReq
	// answers counts the failed answers by HTTP status and error code.
	answers map[string]int
}

type faultReq struct {
	at     time.Time
	failed bool
}

func (r *faultRig) client(n string) *faultClient {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.clients[n]
}

// live is the i-th instance the load may use, round-robin.
func (r *faultRig) live(i int64) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range int64(len(r.names)) {
		n := r.names[(i+k)%int64(len(r.names))]
		if !r.down[n] {
			return n
		}
	}
	return r.names[0]
}

func (r *faultRig) setDown(n string, down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down[n] = down
}

// startInstance starts (or restarts) instance n on its data directory.
func (r *faultRig) startInstance(n string) {
	s := start(r.t, r.bin, r.dirs[n], r.env(n)...)
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.servers[n]; old != nil {
		r.logs.WriteString(old.log.String())
	}
	r.servers[n], r.clients[n] = s, newFaultClient(s.base)
}

// do sends one request of the load, counting it.
func (r *faultRig) do(on, method, path, key string, body any) (int, map[string]any, error) {
	at := time.Now()
	code, res, err := r.client(on).do(method, path, key, body)
	r.ackMu.Lock()
	// A call that failed for the server's sake (INTERNAL) failed too,
	// though answered 200 as a call that ran.
	internal := err == nil && code == 200 && errorCode(res) == "INTERNAL"
	r.reqs = append(r.reqs, faultReq{at, err != nil || code >= 500 || internal})
	if err == nil && (code >= 500 || internal) {
		if r.answers == nil {
			r.answers = map[string]int{}
		}
		r.answers[fmt.Sprintf("%d %s", code, errorCode(res))]++
	}
	r.ackMu.Unlock()
	return code, res, err
}

func (r *faultRig) ack(c faultCall) {
	r.ackMu.Lock()
	defer r.ackMu.Unlock()
	r.acked = append(r.acked, c)
}

// op is one operation of the load.
func (r *faultRig) op() {
	i := r.counter.Add(1)
	on, other := r.live(i), r.live(i+1)
	tag := fmt.Sprintf("t%06d", i)
	call := func(tool string, async bool) (int, map[string]any, error) {
		return r.do(on, "POST", "/api/v1/calls", r.key, map[string]any{"tool": tool, "async": async, "session_id": "s",
			"arguments": map[string]any{"tag": tag}})
	}
	switch i % 10 {
	case 0, 1, 2, 3, 4: // sync
		code, res, err := call("tally", false)
		switch {
		case err != nil:
		case code == 200 && res["status"] == "succeeded":
			r.ack(faultCall{res["call_id"].(string), tag, "sync", on})
		case res["status"] == "unrecorded":
			r.ackMu.Lock()
			r.unrecorded = append(r.unrecorded, faultCall{res["call_id"].(string), tag, "sync", on})
			r.ackMu.Unlock()
		}
	case 5, 6: // async, quick or slow
		tool := map[int64]string{5: "tally", 6: "tally_slow"}[i%10]
		if code, res, err := call(tool, true); err == nil && code == 202 {
			r.ack(faultCall{res["call_id"].(string), tag, "async", on})
		}
	case 7: // approved on another instance
		code, res, err := call("tally_approved", false)
		if err != nil || code != 202 {
			return
		}
		r.ack(faultCall{res["call_id"].(string), tag, "approval", on})
		approval := res["data"].(map[string]any)["approval_id"].(string)
		deadline := time.Now().Add(20 * time.Second)
		for try := int64(1); time.Now().Before(deadline); try++ { // until an instance records the decision
			code, _, err := r.do(r.live(i+try), "POST", "/api/v1/approvals/"+approval+"/approve", r.keys["reviewer"], map[string]any{"reason": "ok"})
			if err == nil && (code == 200 || code == 409) {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	case 8: // register a tool
		name := "echo_" + tag
		def := map[string]any{"name": name, "version": "1.0.0", "category": "code",
			"description": "Echo a text back. Input: text. Output: the same text.",
			"parameters":  map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []any{"text"}},
			"security":    map[string]any{"level": "safe"}, "runner": map[string]any{"kind": "builtin", "builtin": "echo"}}
		if code, _, err := r.do(on, "POST", "/api/v1/tools", r.key, def); err == nil && code == 201 {
			r.ackMu.Lock()
			r.tools = append(r.tools, name)
			r.ackMu.Unlock()
		}
	case 9: // select
		_, _, _ = r.do(other, "POST", "/api/v1/tools/select", r.key, map[string]any{"query": "record a tagged job " + tag, "session_id": "s", "limit": 5})
	}
}

// load runs the operations on workers until stop is closed.
func (r *faultRig) load(workers int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
					r.op()
				}
			}
		})
	}
	return func() { close(done); wg.Wait() }
}

// limited sends n calls of the rate-limited tool and returns how many ran.
func (r *faultRig) limited(n int) int {
	ok := 0
	for i := range n {
		on := r.live(int64(i))
		code, res, err := r.do(on, "POST", "/api/v1/calls", r.keys["limited"], map[string]any{"tool": "tally_limited", "session_id": "l",
			"arguments": map[string]any{"tag": fmt.Sprintf("lim%d-%d", time.Now().UnixNano(), i)}})
		if err == nil && code == 200 && res["status"] == "succeeded" {
			ok++
		}
	}
	return ok
}

// recovered waits until every live instance answers a sync call (each
// probed every 50 ms, at once), and returns when the last one did.
func (r *faultRig) recovered(within time.Duration) time.Time {
	deadline := time.Now().Add(within)
	var mu sync.Mutex
	var last time.Time
	var wg sync.WaitGroup
	for _, n := range r.names {
		r.mu.Lock()
		down := r.down[n]
		r.mu.Unlock()
		if down {
			continue
		}
		wg.Go(func() {
			for {
				code, _, err := r.client(n).do("POST", "/api/v1/calls", r.key, map[string]any{"tool": "tally", "session_id": "probe",
					"arguments": map[string]any{"tag": "probe"}})
				if err == nil && code == 200 {
					mu.Lock()
					if now := time.Now(); now.After(last) {
						last = now
					}
					mu.Unlock()
					return
				}
				if time.Now().After(deadline) {
					r.t.Errorf("instance %s does not answer calls %s after the fault: %d %v", n, within, code, err)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	if r.t.Failed() {
		r.t.FailNow()
	}
	return last
}

// faultReport is what one fault did to the load.
type faultReport struct {
	acked, lost, duplicated, falselyInterrupted, unrecorded int
	requests, failed                                        int
	recover                                                 time.Duration
}

// errorRate is the share of requests made during [from, to) that failed.
func (r *faultRig) errorRate(from, to time.Time) (int, int) {
	r.ackMu.Lock()
	defer r.ackMu.Unlock()
	n, failed := 0, 0
	for _, q := range r.reqs {
		if !q.at.Before(from) && q.at.Before(to) {
			n++
			if q.failed {
				failed++
			}
		}
	}
	return n, failed
}

// runs counts each tag's runs (begun) and ends on the host, in every
// instance's session directories.
func (r *faultRig) runs() (begun, ended map[string]int) {
	begun, ended = map[string]int{}, map[string]int{}
	for _, dir := range r.dirs {
		_ = filepath.WalkDir(filepath.Join(dir, "sessions"), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			into := map[string]map[string]int{"runs.log": begun, "done.log": ended}[d.Name()]
			if into == nil {
				return nil
			}
			raw, _ := os.ReadFile(path)
			for _, line := range strings.Fields(string(raw)) {
				into[line]++
			}
			return nil
		})
	}
	return begun, ended
}

// verify checks every acknowledged write from the outside once the load
// stopped; interruptible is whether the fault may interrupt a call
// honestly (an instance killed while its tool ran).
func (r *faultRig) verify(interruptible bool) faultReport {
	t := r.t
	var rep faultReport
	statuses := map[string]string{}
	// refused: an async call accepted and then refused when it would run
	// (its category's queue full while the database was away) ended, and
	// its end is recorded.
	final := map[string]bool{"succeeded": true, "failed": true, "interrupted": true, "refused": true}
	for i, c := range r.acked {
		asked := r.live(int64(i))
		deadline := time.Now().Add(90 * time.Second)
		for {
			code, rec, err := r.client(asked).do("GET", "/api/v1/calls/"+c.id, r.key, nil)
			if err == nil && code == 200 && final[rec["status"].(string)] {
				statuses[c.id] = rec["status"].(string)
				if c.kind == "sync" {
					if rec["status"] != "succeeded" || !strings.Contains(fmt.Sprint(rec["result"]), c.tag) {
						t.Errorf("sync call %s (tag %s, on %s) answered succeeded is kept as %v %v", c.id, c.tag, c.on, rec["status"], rec["result"])
					}
				}
				break
			}
			if err == nil && code == 404 {
				rep.lost++
				t.Errorf("%s call %s (tag %s, on %s) was acknowledged and is not in the history", c.kind, c.id, c.tag, c.on)
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s call %s (tag %s, on %s) has not ended: %d %v %v", c.kind, c.id, c.tag, c.on, code, rec, err)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	rep.acked = len(r.acked)
	rep.unrecorded = len(r.unrecorded)
	begun, ended := r.runs()
	for tag, n := range begun {
		if n > 1 && tag != "probe" {
			rep.duplicated++
			t.Errorf("tag %s ran %d times", tag, n)
		}
	}
	byStatus := map[string]int{}
	for _, c := range r.acked {
		s := statuses[c.id]
		byStatus[c.kind+" "+s]++
		switch {
		case s == "succeeded" && begun[c.tag] != 1:
			t.Errorf("%s call %s (tag %s) succeeded having run %d times", c.kind, c.id, c.tag, begun[c.tag])
		case s == "interrupted" && !interruptible:
			rep.falselyInterrupted++
			t.Errorf("%s call %s (tag %s, on %s) is recorded interrupted, though no instance stopped (its tool ended %d times)", c.kind, c.id, c.tag, c.on, ended[c.tag])
		case s == "failed" && ended[c.tag] > 0:
			t.Errorf("%s call %s (tag %s) is recorded failed, though its tool ran to its end", c.kind, c.id, c.tag)
		}
	}
	// Every call whose tool began is in the history, answered or not
	// (its record was made durable before the tool began).
	history := r.history()
	for tag := range begun {
		if tag != "probe" && !strings.HasPrefix(tag, "lim") && !history[tag] {
			rep.lost++
			t.Errorf("the tool of the call tagged %s began, and the call is not in the history", tag)
		}
	}
	// Registrations acknowledged are there.
	for i, name := range r.tools {
		if code, _, err := r.client(r.live(int64(i))).do("GET", "/api/v1/tools/"+name, r.key, nil); err != nil || code != 200 {
			rep.lost++
			t.Errorf("tool %s was registered and is missing: %d %v", name, code, err)
		}
	}
	// No deadlock anywhere.
	r.mu.Lock()
	logs := r.logs.String()
	for _, s := range r.servers {
		logs += s.log.String()
	}
	r.mu.Unlock()
	if r.pg != nil {
		logs += r.pg.Log()
	}
	for _, bad := range []string{"40P01", "deadlock detected"} {
		if strings.Contains(logs, bad) {
			t.Errorf("the logs report %q:\n%s", bad, grepLines(logs, bad))
		}
	}
	t.Logf("acknowledged %d calls and %d registrations; by kind and end: %v; failed answers: %v", len(r.acked), len(r.tools), byStatus, r.answers)
	return rep
}

// history is the set of tags the calls in the history were sent with.
func (r *faultRig) history() map[string]bool {
	tags := map[string]bool{}
	c := r.client(r.live(0))
	for offset := 0; ; offset += 1000 {
		code, body, err := c.do("GET", fmt.Sprintf("/api/v1/calls?limit=1000&offset=%d", offset), r.key, nil)
		if err != nil || code != 200 {
			r.t.Fatalf("list the history: %d %v", code, err)
		}
		calls, _ := body["calls"].([]any)
		for _, raw := range calls {
			rec, _ := raw.(map[string]any)
			var args struct{ Tag string }
			raw, _ := rec["arguments"].(string) // the arguments as recorded: JSON text
			_ = json.Unmarshal([]byte(raw), &args)
			tags[args.Tag] = true
		}
		if len(calls) < 1000 {
			return tags
		}
	}
}

// grepLines is the lines of s holding sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	if len(out) > 10 {
		out = out[:10]
	}
	return strings.Join(out, "\n")
}

// newFaultRig starts three instances over a Postgres and a Redis of the
// test's own, with the tools and principals the load uses.
func newFaultRig(t *testing.T, bin string) *faultRig {
	pg, redis := dbtest.PostgresServer(t), dbtest.RedisServer(t)
	db := pg.Database(t, "toolbelt")
	r := &faultRig{t: t, bin: bin, names: []string{"a", "b", "c"}, dirs: map[string]string{}, pg: pg, redis: redis,
		key: testAdminKey, keys: map[string]string{},
		servers: map[string]*server{}, clients: map[string]*faultClient{}, down: map[string]bool{}}
	r.env = func(name string) []string {
		return []string{"TOOLBELT_DATABASE_URL=" + db, "TOOLBELT_REDIS_URL=" + redis.URL(), "TOOLBELT_INSTANCE=" + name, "TOOLBELT_ADMIN_KEY=" + r.key}
	}
	tmp := sandboxTraversable(t)
	for _, n := range r.names {
		r.dirs[n] = filepath.Join(tmp, n)
		r.startInstance(n)
	}
	store, err := models.OpenPostgres(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	r.store = store
	r.setup()
	return r
}

// sandboxTraversable is a temporary directory the sandbox's user (uid
// 65534, as root) can traverse to the data directories below it.
func sandboxTraversable(t testing.TB) string {
	tmp := t.TempDir()
	for _, p := range []string{filepath.Dir(tmp), tmp} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return tmp
}

// setup registers the load's tools and principals on the first instance
// and waits until every instance knows them.
func (r *faultRig) setup() {
	t := r.t
	a := r.client(r.names[0])
	must := func(method, path string, body any, want int) map[string]any {
		t.Helper()
		code, res, err := a.do(method, path, r.key, body)
		if err != nil || code != want {
			t.Fatalf("%s %s: %d %v %v", method, path, code, res, err)
		}
		return res
	}
	r.keys["reviewer"] = must("POST", "/api/v1/principals", map[string]any{"name": "reviewer", "role": "reviewer"}, 201)["key"].(string)
	limited := must("POST", "/api/v1/principals", map[string]any{"name": "limited", "role": "agent"}, 201)
	r.keys["limited"] = limited["key"].(string)
	must("PUT", fmt.Sprintf("/api/v1/principals/%v/grants", limited["id"]), map[string]any{"categories": []string{"code"}}, 200)
	must("POST", "/api/v1/tools", faultTool("tally", "0.05", false, 0), 201)
	must("POST", "/api/v1/tools", faultTool("tally_slow", "2", false, 0), 201)
	must("POST", "/api/v1/tools", faultTool("tally_approved", "0.05", true, 0), 201)
	must("POST", "/api/v1/tools", faultTool("tally_limited", "0", false, faultLimit), 201)
	for _, n := range r.names {
		deadline := time.Now().Add(15 * time.Second)
		for {
			if code, _, err := r.client(n).do("GET", "/api/v1/tools/tally_limited", r.keys["limited"], nil); err == nil && code == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("instance %s does not know the tools", n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// leader is the instance whose /readyz says it leads, "" when none does.
func (r *faultRig) leaders() []string {
	var out []string
	for _, n := range r.names {
		r.mu.Lock()
		down := r.down[n]
		r.mu.Unlock()
		if down {
			continue
		}
		_, body, err := r.client(n).do("GET", "/readyz", "", nil)
		if err == nil && body["role"] == "leader" {
			out = append(out, n)
		}
	}
	return out
}

// clusterFault is one fault of the cluster: inject returns once the
// fault is over (the component is back, the instance restarted) and says
// whether a call may honestly end interrupted.
type clusterFault struct {
	name   string
	inject func(r *faultRig) (interruptible bool)
}

var clusterFaults = []clusterFault{
	{"postgres_fast_restart", func(r *faultRig) bool {
		r.pg.Stop() // pg_ctl -m fast: sessions end, then the server
		time.Sleep(3 * time.Second)
		if err := r.pg.Start(); err != nil {
			r.t.Fatal(err)
		}
		return false
	}},
	{"postgres_killed", func(r *faultRig) bool {
		r.pg.Kill()
		time.Sleep(5 * time.Second)
		if err := r.pg.Start(); err != nil {
			r.t.Fatal(err)
		}
		return false
	}},
	{"redis_stopped_20s", func(r *faultRig) bool {
		r.redis.Stop()
		time.Sleep(20 * time.Second)
		r.redis.Start()
		return false
	}},
	{"redis_restarted", func(r *faultRig) bool {
		r.redis.Restart()
		return false
	}},
	{"instance_killed_holding_calls", func(r *faultRig) bool {
		// b holds running background calls when it is killed.
		deadline := time.Now().Add(30 * time.Second)
		for r.heldBy("b") < 1 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		r.setDown("b", true)
		r.mu.Lock()
		_ = r.servers["b"].cmd.Process.Kill()
		r.mu.Unlock()
		time.Sleep(7 * time.Second) // its calls are taken over meanwhile
		r.startInstance("b")
		r.setDown("b", false)
		return true
	}},
	{"leader_frozen_12s", func(r *faultRig) bool {
		leaders := r.leaders()
		if len(leaders) != 1 {
			r.t.Fatalf("leaders before the freeze: %v", leaders)
		}
		frozen := leaders[0]
		r.setDown(frozen, true)
		r.mu.Lock()
		proc := r.servers[frozen].cmd.Process
		r.mu.Unlock()
		_ = proc.Signal(syscall.SIGSTOP)
		froze := time.Now()
		var took time.Duration
		for time.Since(froze) < 12*time.Second {
			if l := r.leaders(); len(l) == 1 && took == 0 {
				took = time.Since(froze)
			}
			time.Sleep(100 * time.Millisecond)
		}
		_ = proc.Signal(syscall.SIGCONT)
		r.setDown(frozen, false)
		if took == 0 {
			r.t.Errorf("no instance led while the leader %s was frozen for 12 s", frozen)
		} else {
			r.t.Logf("an instance led %s after the leader %s froze", took.Round(100*time.Millisecond), frozen)
		}
		// Once it runs again, one leader.
		deadline := time.Now().Add(15 * time.Second)
		for {
			l := r.leaders()
			if len(l) == 1 {
				break
			}
			if time.Now().After(deadline) {
				r.t.Errorf("leaders after the frozen one ran again: %v", l)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		return false
	}},
}

// heldBy counts the running calls instance n holds, from the database.
func (r *faultRig) heldBy(n string) int64 {
	var k int64
	r.store.DB().Model(&models.Call{}).Where("status = ? AND claimed_by LIKE ?", models.StatusRunning, n+"#%").Count(&k)
	return k
}

// faultsAtOnce is how many of TestFaults' faults run at once.
const faultsAtOnce = 3

// TestFaults injects each fault into a deployment under load and checks
// what the outside sees: nothing acknowledged lost, nothing run twice, no
// call falsely interrupted, no deadlock, the limit exact.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault suite runs the real binary for minutes")
	}
	bin := buildBinary(t)
	var mu sync.Mutex // guards reports
	reports := map[string]faultReport{}
	report := func(name string, rep faultReport) {
		mu.Lock()
		defer mu.Unlock()
		reports[name] = rep
	}
	// Each fault has a deployment of its own (its own Postgres and Redis
	// servers, instances and directories), so faultsAtOnce of them run
	// side by side: most of a fault's time is waiting (the fault lasts,
	// leases run out), not the CPU.
	sem := make(chan struct{}, faultsAtOnce)
	var wg sync.WaitGroup
	run := func(name string, fn func(t *testing.T)) {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			t.Run(name, fn)
		})
	}
	for _, f := range clusterFaults {
		run(f.name, func(t *testing.T) { faultUnderLoad(t, bin, f, report) })
	}
	run("sqlite_full_disk", func(t *testing.T) { report("sqlite_full_disk", fullDiskFault(t, bin)) })
	run("postgres_stopped_30s", func(t *testing.T) { report("postgres_stopped_30s", postgresOutageFault(t, bin)) })
	wg.Wait()
	names := make([]string, 0, len(reports))
	for n := range reports {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "%-30s %6s %5s %5s %5s %9s %9s\n", "fault", "acked", "lost", "dup", "unrec", "err_rate", "recover_s")
	for _, n := range names {
		rep := reports[n]
		rate := math.NaN()
		if rep.requests > 0 {
			rate = float64(rep.failed) / float64(rep.requests)
		}
		fmt.Fprintf(&b, "%-30s %6d %5d %5d %5d %8.1f%% %9.1f\n", n, rep.acked, rep.lost, rep.duplicated, rep.unrecorded, 100*rate, rep.recover.Seconds())
	}
	t.Logf("fault suite:\n%s", b.String())
}

// faultUnderLoad injects f into a deployment of its own under load and
// reports what it measured.
func faultUnderLoad(t *testing.T, bin string, f clusterFault, report func(string, faultReport)) {
	r := newFaultRig(t, bin)
	// The limited agent starts its window: 20 calls before the fault.
	first := r.limited(20)
	stop := r.load(4)
	time.Sleep(3 * time.Second)
	began := time.Now()
	interruptible := f.inject(r)
	back := time.Now()
	upAt := r.recovered(60 * time.Second)
	time.Sleep(3 * time.Second)
	stop()
	// 25 more within the minute of the first: the limit holds
	// exactly across the fault.
	ran := first + r.limited(25)
	if ran != faultLimit {
		t.Errorf("the agent limited to %d calls a minute made %d across the fault", faultLimit, ran)
	}
	rep := r.verify(interruptible)
	rep.requests, rep.failed = r.errorRate(began, upAt)
	rep.recover = upAt.Sub(back)
	report(f.name, rep)
}

// fullDiskFault runs one instance on SQLite with its data directory on a
// small tmpfs, fills it mid-load, then kills the instance, frees space
// and restarts it: every call answered 200 is in the history; the others
// were answered NOT_RECORDED or refused with the full disk named.
func fullDiskFault(t *testing.T, bin string) faultReport {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the full disk fault mounts a tmpfs: run as root on CI")
		}
		t.Skip("mounting a tmpfs needs root")
	}
	tmp := sandboxTraversable(t)
	data := filepath.Join(tmp, "a")
	if err := os.Mkdir(data, 0o711); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m,mode=0711", "tmpfs", data).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", data).Run() })
	r := &faultRig{t: t, bin: bin, names: []string{"a"}, dirs: map[string]string{"a": data},
		key: testAdminKey, keys: map[string]string{},
		servers: map[string]*server{}, clients: map[string]*faultClient{}, down: map[string]bool{}}
	r.env = func(string) []string { return []string{"TOOLBELT_ADMIN_KEY=" + r.key} }
	r.startInstance("a")
	r.setup()
	stop := r.load(4)
	time.Sleep(2 * time.Second)
	// Fill the disk to the last block.
	filler := filepath.Join(data, "filler")
	began := time.Now()
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=64k").CombinedOutput(); err == nil {
		t.Fatalf("dd filled nothing: %s", out)
	}
	time.Sleep(4 * time.Second)
	// Readiness names the full disk.
	code, body, err := r.client("a").do("GET", "/readyz", "", nil)
	if err != nil || code != 503 || !strings.Contains(fmt.Sprint(body), "full") {
		t.Errorf("/readyz with the data directory's disk full: %d %v %v, want 503 naming it", code, body, err)
	}
	stop()
	full, failed := r.errorRate(began, time.Now())
	// Killed while the disk is full, then space freed and restarted.
	r.mu.Lock()
	_ = r.servers["a"].cmd.Process.Kill()
	r.mu.Unlock()
	exit := <-r.servers["a"].exited
	r.servers["a"].exited <- exit // for its cleanup
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	r.startInstance("a")
	upAt := r.recovered(30 * time.Second)
	// Every answer during the fault was a recorded result, NOT_RECORDED
	// with the result, or a refusal naming the disk: never a bare 500.
	if n := r.answers["500 INTERNAL"]; n > 0 {
		t.Errorf("%d answers during the full disk were a bare 500 INTERNAL (failed answers: %v)", n, r.answers)
	}
	rep := r.verify(true) // killed: a call running then ends interrupted
	rep.requests, rep.failed = full, failed
	rep.recover = upAt.Sub(back)
	t.Logf("%d calls answered NOT_RECORDED with their result while the disk was full", len(r.unrecorded))
	return rep
}

// postgresOutageFault stops the Postgres server of one instance (without
// Redis: its category queues and rate limits are in the database too)
// for 30 s, longer than the checked-key cache's 10 s (issue 39). An agent
// calls file_write once a second through it: within the outage grace
// (TOOLBELT_OUTAGE_GRACE, 5 minutes) every call is served and /readyz
// answers 200; once Postgres is back every answered call is in the
// history exactly once, with its file on the host.
func postgresOutageFault(t *testing.T, bin string) faultReport {
	pg := dbtest.PostgresServer(t)
	db := pg.Database(t, "toolbelt")
	data := filepath.Join(sandboxTraversable(t), "a")
	s := start(t, bin, data, "TOOLBELT_DATABASE_URL="+db, "TOOLBELT_ADMIN_KEY="+testAdminKey, "TOOLBELT_INSTANCE=a")
	c := newFaultClient(s.base)
	var rep faultReport
	answered := map[string]string{} // call id → the file it wrote
	write := func(i int) {
		path := fmt.Sprintf("w%03d.txt", i)
		code, res, err := c.do("POST", "/api/v1/calls", testAdminKey, map[string]any{"tool": "file_write", "session_id": "outage",
			"arguments": map[string]any{"path": path, "content": path}})
		rcode, ready, rerr := c.do("GET", "/readyz", "", nil)
		rep.requests++
		switch {
		case err == nil && code == 200 && res["status"] == "succeeded":
			answered[res["call_id"].(string)] = path
			if rerr != nil || rcode != 200 {
				t.Errorf("call %d succeeded while /readyz answered %d %v %v", i, rcode, ready["reasons"], rerr)
			}
		default:
			rep.failed++
			t.Errorf("call %d during the outage: %d %v %v %v (/readyz %d %v)", i, code, res["status"], res["error"], err, rcode, ready["reasons"])
		}
	}
	write(0)
	pg.Stop()
	stopped := time.Now()
	tick := time.NewTicker(time.Second) // the agent's pace: a call a second
	defer tick.Stop()
	for i := 1; time.Since(stopped) < 30*time.Second; i++ {
		write(i)
		<-tick.C
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	// Every answered call reaches the history once the spool is written.
	var calls []any
	poll.Until(t, 60*time.Second, "every answered call in the history", func() (bool, string) {
		code, body, err := c.do("GET", "/api/v1/calls?session_id=outage&limit=1000", testAdminKey, nil)
		calls, _ = body["calls"].([]any)
		return err == nil && code == 200 && len(calls) >= len(answered),
			fmt.Sprintf("the history holds %d of the %d answered calls after Postgres returned: %d %v", len(calls), len(answered), code, err)
	})
	rep.recover = time.Since(back)
	seen := map[string]int{}
	for _, raw := range calls {
		rec, _ := raw.(map[string]any)
		var args struct{ Path string }
		_ = json.Unmarshal([]byte(fmt.Sprint(rec["arguments"])), &args)
		seen[args.Path]++
		if want, ok := answered[fmt.Sprint(rec["id"])]; ok && (want != args.Path || rec["status"] != "succeeded") {
			t.Errorf("call %v answered succeeded writing %s is kept as %v writing %s", rec["id"], want, rec["status"], args.Path)
		}
	}
	for id, path := range answered {
		if seen[path] != 1 {
			rep.lost++
			t.Errorf("call %s writing %s is in the history %d times", id, path, seen[path])
		}
		if raw, err := os.ReadFile(filepath.Join(data, "sessions", "p1", "outage", path)); err != nil || string(raw) != path {
			t.Errorf("call %s answered succeeded, and %s holds %q (%v)", id, path, raw, err)
		}
	}
	rep.acked = len(answered)
	return rep
}
