package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The kinds of acknowledged writes the crash test drives and checks.
const (
	kindRegister  = "register"
	kindSelect    = "select"
	kindFeedback  = "feedback"
	kindSync      = "sync_call"
	kindAsync     = "async_call"
	kindDangerous = "approval_call"
	kindApprove   = "approve"
	kindDeny      = "deny"
)

var faultKinds = []string{kindRegister, kindSelect, kindFeedback, kindSync, kindAsync, kindDangerous, kindApprove, kindDeny}

// faultClient talks to one run of the server. Unlike server.post it never
// fails the test on a transport error: requests in flight at a kill are
// expected to break, and only answers received in full acknowledge a write.
type faultClient struct {
	base string
	tr   *http.Transport
	hc   *http.Client
}

func newFaultClient(base string) *faultClient {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	return &faultClient{base: base, tr: tr, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// do sends one JSON request. A non-nil error means nothing was answered in
// full (connection refused or cut, body truncated or not JSON).
func (c *faultClient) do(method, path, key string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("read answer: %w", err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return 0, nil, fmt.Errorf("decode answer %d %q: %w", resp.StatusCode, raw, err)
	}
	return resp.StatusCode, out, nil
}

// ackedCall is a call the server acknowledged, with what it answered.
type ackedCall struct {
	id, kind, tool, key string
	round               int
	answered            string // the status in the answer
	approvalID          string
	decision            string // "approved" or "denied" once a decision was acknowledged
	settled             string // the final status a check after an earlier restart found
}

type ackedSelection struct {
	id, key string
	round   int
}

// faultLedger is every write the server acknowledged so far, across rounds,
// and the counts of the current round.
type faultLedger struct {
	mu         sync.Mutex
	tools      map[string]string // name → version answered by the 201
	toolNames  []string
	selections []ackedSelection
	calls      []*ackedCall
	pending    []*ackedCall // approval-bound calls without an acknowledged decision
	dangerous  int          // approval-bound calls acknowledged this round

	acked, refused, cut map[string]int
	refusals            map[string]int  // "kind status code" → count, this round
	unexpected          []string        // transport errors before any kill
	reported            map[string]bool // writes already reported wrong, by id
}

func (l *faultLedger) resetRound() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked, l.refused, l.cut, l.refusals = map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	l.dangerous = 0
}

// TestCrashSafety starts the real binary, drives mixed load from several
// workers, kills it with SIGKILL at a random moment, restarts it, and
// checks that every write the server acknowledged — registrations,
// selections, sync, async and approval-bound calls, approval decisions — is
// present and consistent with its answer, and that no call is left running.
// It repeats this over several rounds on the same data directory, checking
// every write of every round after each restart.
//
// TOOLBELT_FAULT_SEED fixes the random schedule (the interleaving stays the
// machine's). Answered synchronous calls survive through the call journal
// (README "Durability").
func TestCrashSafety(t *testing.T) {
	t.Parallel() // its own server, data directory and database
	if testing.Short() {
		t.Skip("starts and kills the real binary several times")
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("TOOLBELT_FAULT_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("TOOLBELT_FAULT_SEED=%q: %v", v, err)
		}
	}
	t.Logf("seed %d (TOOLBELT_FAULT_SEED reproduces the schedule)", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	began := time.Now()
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	s := start(t, bin, data)
	t.Logf("built and started in %v", time.Since(began).Round(time.Millisecond))
	adminKey := s.key
	if adminKey == "" {
		t.Fatalf("no admin key printed:\n%s", s.output())
	}
	keys := setupPrincipals(t, newFaultClient(s.base), adminKey)

	l := &faultLedger{tools: map[string]string{}, reported: map[string]bool{}}
	const rounds = 5
	totalLost := map[string]int{}
	totalAcked := map[string]int{}
	for round := 1; round <= rounds; round++ {
		l.resetRound()
		c := newFaultClient(s.base)
		loadFor := 300*time.Millisecond + time.Duration(rng.Int64N(int64(1700*time.Millisecond)))
		var killed atomic.Bool
		var stop atomic.Bool
		var wg sync.WaitGroup
		for w := range 6 {
			wr := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
			wg.Go(func() { faultWorker(c, l, keys, round, w, wr, &killed, &stop) })
		}
		time.Sleep(loadFor)
		killed.Store(true)
		if err := s.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		err := <-s.exited
		s.exited <- err // for start's cleanup
		stop.Store(true)
		wg.Wait()
		c.tr.CloseIdleConnections()

		restarted := time.Now()
		s = start(t, bin, data)
		c = newFaultClient(s.base)
		res := verifyLedger(c, l, keys)

		l.mu.Lock()
		t.Logf("round %d: killed after %v; acknowledged %s; refused %s (%s); cut by the kill %s; newly lost or inconsistent %s, still from earlier rounds %d; restart and check took %v",
			round, loadFor.Round(time.Millisecond), kindCounts(l.acked), kindCounts(l.refused), codeCounts(l.refusals), kindCounts(l.cut),
			kindCounts(res.lost), res.still, time.Since(restarted).Round(time.Millisecond))
		for k, n := range l.acked {
			totalAcked[k] += n
		}
		unexpected := l.unexpected
		l.unexpected = nil
		l.mu.Unlock()
		for k, n := range res.lost {
			totalLost[k] += n
		}
		for _, u := range unexpected {
			t.Errorf("round %d: request failed before the kill: %s", round, u)
		}
		if len(res.problems) > 0 {
			t.Errorf("round %d: %d acknowledged writes missing or inconsistent after the restart:\n%s", round, len(res.problems), strings.Join(res.problems, "\n"))
		}
	}
	t.Logf("all rounds: acknowledged %s; lost or inconsistent %s", kindCounts(totalAcked), kindCounts(totalLost))
	// Nothing lost proves something only if writes of every kind were
	// acknowledged.
	for _, kind := range []string{kindRegister, kindSelect, kindFeedback, kindSync, kindAsync, kindDangerous, kindApprove, kindDeny} {
		if totalAcked[kind] == 0 {
			t.Errorf("no %s was acknowledged in any round: the load did not exercise it", kind)
		}
	}
	stopping := time.Now()
	s.stop(t)
	t.Logf("stopped in %v; %v in all", time.Since(stopping).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// faultKeys are the API keys of the test's principals.
type faultKeys struct {
	admin, agent, reviewer string
}

// setupPrincipals creates a reviewer and an agent granted the filesystem
// and code categories, and registers the dangerous tool whose calls wait
// for approval.
func setupPrincipals(t *testing.T, c *faultClient, admin string) faultKeys {
	t.Helper()
	keys := faultKeys{admin: admin}
	for _, role := range []string{"reviewer", "agent"} {
		code, body, err := c.do("POST", "/api/v1/principals", admin, map[string]any{"name": "fault-" + role, "role": role})
		if err != nil || code != 201 {
			t.Fatalf("create %s: %d %v %v", role, code, body, err)
		}
		key, _ := body["key"].(string)
		if role == "reviewer" {
			keys.reviewer = key
			continue
		}
		keys.agent = key
		id := fmt.Sprint(body["id"])
		code, body, err = c.do("PUT", "/api/v1/principals/"+id+"/grants", admin, map[string]any{"categories": []string{"filesystem", "code"}})
		if err != nil || code != 200 {
			t.Fatalf("grant the agent: %d %v %v", code, body, err)
		}
	}
	def := map[string]any{
		"name":        "fault_overwrite",
		"version":     "1.0.0",
		"description": "Overwrite a note in the work directory. Input: path, content. Output: bytes written.",
		"category":    "filesystem",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{
			"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}, "required": []any{"path", "content"}},
		"security": map[string]any{"level": "dangerous"},
		"runner":   map[string]any{"kind": "builtin", "builtin": "file_write"},
	}
	if code, body, err := c.do("POST", "/api/v1/tools", admin, def); err != nil || code != 201 {
		t.Fatalf("register the dangerous tool: %d %v %v", code, body, err)
	}
	return keys
}

// faultWorker sends a random mix of writes until stop, recording each one
// the server acknowledged.
func faultWorker(c *faultClient, l *faultLedger, keys faultKeys, round, w int, rng *rand.Rand, killed, stop *atomic.Bool) {
	session := fmt.Sprintf("fault-w%d", w)
	n := 0
	// outcome classifies one answer: acknowledged, refused by the server,
	// or cut (no answer; expected only once the kill was sent).
	outcome := func(kind string, code int, body map[string]any, err error, want int) bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		switch {
		case err != nil && killed.Load():
			l.cut[kind]++
			return false
		case err != nil:
			l.unexpected = append(l.unexpected, fmt.Sprintf("%s: %v", kind, err))
			return false
		case code >= 500 && !killed.Load(): // the server failing is not a refusal
			l.unexpected = append(l.unexpected, fmt.Sprintf("%s: %d %s", kind, code, errorCode(body)))
			return false
		case code != want:
			l.refused[kind]++
			l.refusals[fmt.Sprintf("%s %d %s", kind, code, errorCode(body))]++
			return false
		}
		l.acked[kind]++
		return true
	}
	caller := func() string {
		if rng.IntN(2) == 0 {
			return keys.agent
		}
		return keys.admin
	}
	for !stop.Load() {
		n++
		switch p := rng.IntN(100); {
		case p < 10: // register a tool
			name := fmt.Sprintf("fault_r%d_w%d_%d", round, w, n)
			def := map[string]any{
				"name":        name,
				"version":     "1.0.0",
				"description": fmt.Sprintf("Echo a text back, round %d. Input: text. Output: the same text.", round),
				"category":    "code",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{
					"text": map[string]any{"type": "string"}}, "required": []any{"text"}},
				"security": map[string]any{"level": "safe"},
				"runner":   map[string]any{"kind": "builtin", "builtin": "echo"},
			}
			code, body, err := c.do("POST", "/api/v1/tools", keys.admin, def)
			if outcome(kindRegister, code, body, err, 201) {
				l.mu.Lock()
				l.tools[name], _ = body["version"].(string)
				l.toolNames = append(l.toolNames, name)
				l.mu.Unlock()
			}
		case p < 25: // select, sometimes with feedback
			key := caller()
			code, body, err := c.do("POST", "/api/v1/tools/select", key, map[string]any{
				"query": fmt.Sprintf("write note %d of worker %d to a file", n, w), "session_id": session, "limit": 5})
			id, _ := body["selection_id"].(string)
			if !outcome(kindSelect, code, body, err, 200) {
				continue
			}
			l.mu.Lock()
			l.selections = append(l.selections, ackedSelection{id: id, key: key, round: round})
			l.mu.Unlock()
			if rng.IntN(2) == 0 {
				code, body, err := c.do("POST", "/api/v1/selections/"+id+"/feedback", key, map[string]any{"tools": []string{"file_write"}})
				outcome(kindFeedback, code, body, err, 200)
			}
		case p < 65: // a synchronous call
			key := caller()
			tool, args := "file_list", map[string]any{"path": "."}
			switch rng.IntN(4) {
			case 0:
				tool, args = "file_write", map[string]any{"path": fmt.Sprintf("notes/%d.txt", rng.IntN(5)), "content": fmt.Sprintf("round %d call %d", round, n)}
			case 1:
				tool, args = "file_read", map[string]any{"path": fmt.Sprintf("notes/%d.txt", rng.IntN(5))}
			case 2:
				l.mu.Lock()
				if len(l.toolNames) > 0 {
					tool, args = l.toolNames[rng.IntN(len(l.toolNames))], map[string]any{"text": fmt.Sprint("echo ", n)}
				}
				l.mu.Unlock()
			}
			code, body, err := c.do("POST", "/api/v1/calls", key, map[string]any{"tool": tool, "session_id": session, "arguments": args})
			id, _ := body["call_id"].(string)
			status, _ := body["status"].(string)
			if err == nil && code == 200 && (id == "" || status == "") {
				code = -200 // an answer without an id and a status acknowledges nothing
			}
			if outcome(kindSync, code, body, err, 200) {
				l.mu.Lock()
				l.calls = append(l.calls, &ackedCall{id: id, kind: kindSync, tool: tool, key: key, round: round, answered: status})
				l.mu.Unlock()
			}
		case p < 80: // an asynchronous call
			key := caller()
			code, body, err := c.do("POST", "/api/v1/calls", key, map[string]any{"tool": "file_write", "async": true, "session_id": session,
				"arguments": map[string]any{"path": fmt.Sprintf("async/%d.txt", n), "content": "async"}})
			id, _ := body["call_id"].(string)
			if err == nil && code == 202 && (id == "" || body["status"] != "queued") {
				code = -202
			}
			if outcome(kindAsync, code, body, err, 202) {
				l.mu.Lock()
				l.calls = append(l.calls, &ackedCall{id: id, kind: kindAsync, tool: "file_write", key: key, round: round, answered: "queued"})
				l.mu.Unlock()
			}
		case p < 90: // a call that waits for approval
			l.mu.Lock()
			// At most 60 a round, so that over 5 rounds no approval list
			// reaches its 500 entries.
			full := l.dangerous >= 60
			l.mu.Unlock()
			if full {
				continue
			}
			key := caller()
			code, body, err := c.do("POST", "/api/v1/calls", key, map[string]any{"tool": "fault_overwrite", "session_id": session,
				"arguments": map[string]any{"path": fmt.Sprintf("approved/%d.txt", n), "content": "approved"}})
			id, _ := body["call_id"].(string)
			data, _ := body["data"].(map[string]any)
			approval, _ := data["approval_id"].(string)
			if err == nil && code == 202 && (id == "" || approval == "" || body["status"] != "awaiting_approval") {
				code = -202
			}
			if outcome(kindDangerous, code, body, err, 202) {
				ac := &ackedCall{id: id, kind: kindDangerous, tool: "fault_overwrite", key: key, round: round, answered: "awaiting_approval", approvalID: approval}
				l.mu.Lock()
				l.calls = append(l.calls, ac)
				l.pending = append(l.pending, ac)
				l.dangerous++
				l.mu.Unlock()
			}
		default: // a reviewer decides a pending approval
			l.mu.Lock()
			var ac *ackedCall
			if len(l.pending) > 0 {
				i := rng.IntN(len(l.pending))
				ac = l.pending[i]
				l.pending = slices.Delete(l.pending, i, i+1)
			}
			l.mu.Unlock()
			if ac == nil {
				continue
			}
			kind, verb, decision := kindApprove, "approve", "approved"
			if rng.IntN(2) == 0 {
				kind, verb, decision = kindDeny, "deny", "denied"
			}
			code, body, err := c.do("POST", "/api/v1/approvals/"+ac.approvalID+"/"+verb, keys.reviewer, map[string]any{"reason": "decided by the fault test"})
			if outcome(kind, code, body, err, 200) {
				l.mu.Lock()
				ac.decision = decision
				l.mu.Unlock()
			}
		}
	}
}

// verifyResult is what one check of the ledger found.
type verifyResult struct {
	problems []string       // new problems, one line each
	lost     map[string]int // writes newly found lost or inconsistent, by kind
	still    int            // writes reported in an earlier round, still wrong
}

// verifyLedger checks every acknowledged write against the restarted
// server. A write found wrong is reported once, in the first round that
// finds it; later rounds only count it.
func verifyLedger(c *faultClient, l *faultLedger, keys faultKeys) verifyResult {
	var mu sync.Mutex
	out := verifyResult{lost: map[string]int{}}
	report := func(kind, id, format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if l.reported[id] {
			out.still++
			return
		}
		l.reported[id] = true
		out.lost[kind]++
		out.problems = append(out.problems, kind+": "+fmt.Sprintf(format, args...))
	}

	l.mu.Lock()
	type toolAck struct{ name, version string }
	var tools []toolAck
	for name, v := range l.tools {
		tools = append(tools, toolAck{name, v})
	}
	selections := slices.Clone(l.selections)
	calls := make([]ackedCall, len(l.calls))
	for i, ac := range l.calls {
		calls[i] = *ac
	}
	l.mu.Unlock()

	var checks []func()
	for _, ta := range tools {
		checks = append(checks, func() {
			code, body, err := c.do("GET", "/api/v1/tools/"+ta.name, keys.admin, nil)
			if err != nil || code != 200 || body["version"] != ta.version {
				report(kindRegister, ta.name, "tool %s (version %s answered 201): %d %v %v", ta.name, ta.version, code, body["version"], err)
			}
		})
	}
	for _, sa := range selections {
		checks = append(checks, func() {
			code, body, err := c.do("POST", "/api/v1/selections/"+sa.id+"/feedback", sa.key, map[string]any{"tools": []string{"file_read"}})
			if err != nil || code != 200 {
				report(kindSelect, sa.id, "selection %s (round %d): feedback %d %v %v", sa.id, sa.round, code, body, err)
			}
		})
	}
	final := []string{"succeeded", "failed", "interrupted", "refused"}
	type polled struct {
		code int
		rec  map[string]any
		err  error
	}
	seen := make([]polled, len(calls))
	for i, ac := range calls {
		checks = append(checks, func() {
			code, rec, err := pollCall(c, keys.admin, ac.id)
			seen[i] = polled{code, rec, err}
		})
	}
	runChecks(checks, 8)

	// Every approval, by state, read once the calls have settled (recovery
	// may park a resumed call again). No list reaches its 500 entries: at
	// most 60 approval-bound calls are made a round.
	approvals := map[string]string{}
	byCall := map[string][]string{}
	for _, state := range []string{"pending", "approved", "used", "denied", "expired"} {
		code, body, err := c.do("GET", "/api/v1/approvals?status="+state, keys.reviewer, nil)
		list, _ := body["approvals"].([]any)
		if err != nil || code != 200 {
			report("approvals", "list "+state, "list %s: %d %v %v", state, code, body, err)
			continue
		}
		if len(list) >= 500 {
			report("approvals", "full "+state, "list %s is full (%d): cannot check every approval", state, len(list))
		}
		for _, a := range list {
			a, _ := a.(map[string]any)
			id, _ := a["id"].(string)
			call, _ := a["call_id"].(string)
			approvals[id] = state
			byCall[call] = append(byCall[call], id+" "+state)
		}
	}

	settled := make([]string, len(calls))
	for i, ac := range calls {
		func() {
			code, rec, err := seen[i].code, seen[i].rec, seen[i].err
			status, _ := rec["status"].(string)
			settled[i] = status
			where := fmt.Sprintf("call %s (%s, round %d, answered %s", ac.id, ac.tool, ac.round, ac.answered)
			if ac.decision != "" {
				where += ", " + ac.decision
			}
			where += ")"
			if err != nil || code != 200 {
				report(ac.kind, ac.id, "%s: not found: %d %s %v", where, code, errorCode(rec), err)
				return
			}
			if ac.settled != "" && status != ac.settled {
				report(ac.kind, ac.id, "%s: was %s after an earlier restart, now %s", where, ac.settled, status)
				return
			}
			switch ac.kind {
			case kindSync:
				if status != ac.answered || rec["tool"] != ac.tool {
					report(kindSync, ac.id, "%s: recorded as %s of %v", where, status, rec["tool"])
				}
			case kindAsync:
				if !slices.Contains(final, status) {
					report(kindAsync, ac.id, "%s: %s after the restart (%v)", where, status, rec["error_code"])
				}
			case kindDangerous:
				state, known := approvals[ac.approvalID]
				now := fmt.Sprintf("call %s %v; approvals of the call: %v", status, rec["error_code"], byCall[ac.id])
				switch {
				case !known:
					report(kindDangerous, ac.id, "%s: approval %s lost; %s", where, ac.approvalID, now)
				case ac.decision == "approved" && state != "approved" && state != "used":
					report(kindApprove, ac.id, "%s: approval %s is %s; %s", where, ac.approvalID, state, now)
				case ac.decision == "approved" && !slices.Contains(final, status):
					report(kindApprove, ac.id, "%s: not run to an end after approval; %s", where, now)
				case ac.decision == "denied" && state != "denied":
					report(kindDeny, ac.id, "%s: approval %s is %s; %s", where, ac.approvalID, state, now)
				case ac.decision == "denied" && (status != "failed" || rec["error_code"] != "CONFIRMATION_DENIED"):
					report(kindDeny, ac.id, "%s: not ended by the denial; %s", where, now)
				case ac.decision == "" && !slices.Contains(append([]string{"awaiting_approval"}, final...), status):
					report(kindDangerous, ac.id, "%s: %s", where, now)
				}
			}
		}()
	}

	// No call at all is left running, acknowledged or not: recovery marked
	// those running at the kill interrupted, and resumed ones end.
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body, err := c.do("GET", "/api/v1/calls?status=running&limit=1000", keys.admin, nil)
		list, _ := body["calls"].([]any)
		if err != nil || code != 200 {
			report("running", "list running", "list running calls: %d %v %v", code, body, err)
			break
		}
		fresh := 0
		mu.Lock()
		for _, rec := range list {
			rec, _ := rec.(map[string]any)
			id, _ := rec["id"].(string)
			if !l.reported[id] {
				fresh++
			}
		}
		mu.Unlock()
		if fresh == 0 || time.Now().After(deadline) {
			for _, rec := range list {
				rec, _ := rec.(map[string]any)
				id, _ := rec["id"].(string)
				report("running", id, "call %s (%v) still running 10 s after the restart", id, rec["tool"])
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Remember final states: a later restart must show the same.
	l.mu.Lock()
	for i, ac := range l.calls[:len(calls)] {
		if slices.Contains(final, settled[i]) {
			ac.settled = settled[i]
		}
	}
	l.mu.Unlock()
	sort.Strings(out.problems)
	return out
}

// pollCall reads a call until it is no longer queued or running: after a
// restart, recovery resumes queued calls and must have marked those left
// running as interrupted. A call still queued or running after 10 s is
// returned as it is, and fails its check.
func pollCall(c *faultClient, key, id string) (int, map[string]any, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, rec, err := c.do("GET", "/api/v1/calls/"+id, key, nil)
		if err != nil || code != 200 || (rec["status"] != "queued" && rec["status"] != "running") || time.Now().After(deadline) {
			return code, rec, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runChecks runs checks on n goroutines.
func runChecks(checks []func(), n int) {
	work := make(chan func())
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for f := range work {
				f()
			}
		})
	}
	for _, f := range checks {
		work <- f
	}
	close(work)
	wg.Wait()
}

func errorCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// kindCounts formats counts in the order of faultKinds.
func kindCounts(m map[string]int) string {
	var parts []string
	for _, k := range faultKinds {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
		}
	}
	for k, n := range m {
		if !slices.Contains(faultKinds, k) && n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

func codeCounts(m map[string]int) string {
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, n))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
