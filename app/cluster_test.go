package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/poll"
	"toolbelt/models"
	"toolbelt/services/cluster"
	"toolbelt/services/invoke"
)

// running is an instance serving in the background.
type running struct {
	*App
	stop func() // ends Run and waits for it
}

// startInstances builds and runs one instance per name over databaseURL.
func startInstances(t *testing.T, databaseURL string, names ...string) []*running {
	t.Helper()
	return startInstancesWith(t, func(cfg *Config) { cfg.DatabaseURL = databaseURL }, names...)
}

// startInstancesWith builds and runs one instance per name, each of the
// configuration edit makes.
func startInstancesWith(t *testing.T, edit func(*Config), names ...string) []*running {
	t.Helper()
	return startInstancesOpts(t, Options{}, edit, names...)
}

// startInstancesOpts is startInstancesWith with opts (the output and the
// approval sweep are the tests').
func startInstancesOpts(t *testing.T, opts Options, edit func(*Config), names ...string) []*running {
	t.Helper()
	opts.Stdout, opts.LogOutput, opts.ApprovalSweep = io.Discard, io.Discard, 20*time.Millisecond
	out := make([]*running, len(names))
	for i, name := range names {
		cfg := testConfig(t, t.TempDir(), "--instance", name)
		edit(&cfg)
		a, err := New(context.Background(), cfg, opts)
		if err != nil {
			t.Fatalf("instance %s: %v", name, err)
		}
		out[i] = serve(t, a)
	}
	return out
}

// serve runs a until the test ends (or stop) and returns once it serves:
// the calls an earlier run left are recovered by then.
func serve(t *testing.T, a *App) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stopped := false
	r := &running{App: a, stop: func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("instance %s: %v", a.Config.Instance, err)
			}
		}
	}}
	t.Cleanup(r.stop)
	for {
		resp, err := http.Get(a.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			return r
		}
		select {
		case err := <-done:
			t.Fatalf("instance %s: Run returned before it served: %v", a.Config.Instance, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// leaders are the instances that lead now.
func leaders(apps []*running) []*running {
	var out []*running
	for _, a := range apps {
		if a.Cluster.Leading() {
			out = append(out, a)
		}
	}
	return out
}

// waitForLeader polls until exactly one of apps leads, and returns it.
func waitForLeader(t *testing.T, apps []*running, within time.Duration) *running {
	t.Helper()
	var leader *running
	poll.Until(t, within, "exactly one instance leads", func() (bool, string) {
		ls := leaders(apps)
		if len(ls) > 1 {
			t.Fatalf("%d instances lead at once", len(ls))
		}
		if len(ls) == 1 {
			leader = ls[0]
		}
		return leader != nil, "no instance leads"
	})
	return leader
}

// counterValue is the value of series name with label decision=value
// among a's metrics, and whether every series of a carries its instance
// label.
func counterValue(t *testing.T, a *App, name, label, value string) float64 {
	t.Helper()
	families, err := a.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if labelOf(m, "instance") != a.Config.Instance {
				t.Fatalf("%s of instance %s is labelled %v", f.GetName(), a.Config.Instance, m.GetLabel())
			}
			if f.GetName() == name && labelOf(m, label) == value {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestOneLeaderRunsTheJobs runs three instances over one Postgres
// database: exactly one leads and says so in /readyz (the others follow),
// every metric names its instance, an approval past its time expires once
// with every instance running, and when the leader stops another leads
// within seconds.
func TestOneLeaderRunsTheJobs(t *testing.T) {
	apps := startInstances(t, dbtest.Postgres(t), "a", "b", "c")
	leader := waitForLeader(t, apps, 5*time.Second)
	// Followers keep trying every second: still one leader after two
	// rounds. A follower's try that finds a leader leaves no trace (no row
	// written, no log line, no counter) to wait for, so this stays a sleep.
	const twoRounds = 2*cluster.Retry + 100*time.Millisecond
	time.Sleep(twoRounds)
	if ls := leaders(apps); len(ls) != 1 || ls[0] != leader {
		t.Fatalf("the leader changed or multiplied without cause")
	}
	for _, a := range apps {
		var ready struct {
			Instance, Role string
			Components     map[string]struct{ Status, Detail string }
		}
		body := serveGet(t, a.App, "/readyz")
		if err := json.Unmarshal(body, &ready); err != nil {
			t.Fatal(err)
		}
		want := cluster.Follower
		if a == leader {
			want = cluster.Leader
		}
		if ready.Instance != a.Config.Instance || ready.Role != want || ready.Components["database"].Detail != "postgres" {
			t.Errorf("instance %s's readiness: %s", a.Config.Instance, body)
		}
	}

	// A call waiting for an approval already past its time.
	ctx := context.Background()
	past := time.Now().UTC().Add(-time.Minute)
	call := &models.Call{ID: "call-expiring", Tool: "echo", Status: models.StatusAwaitingApproval, CreatedAt: past}
	approval := &models.Approval{ID: "approval-expiring", CallID: call.ID, Tool: "echo", Status: models.ApprovalPending,
		ExpiresAt: past, CreatedAt: past}
	if err := leader.Store.CreateApproval(ctx, approval, call, nil, 0); err != nil {
		t.Fatal(err)
	}
	failed := func(id string) func() (bool, string) {
		return func() (bool, string) {
			rec, err := apps[0].Store.CallByID(ctx, id)
			return err == nil && rec.Status == models.StatusFailed, fmt.Sprintf("%+v, %v", rec, err)
		}
	}
	poll.Until(t, 10*time.Second, "the approval expired", failed(call.ID))
	// A second approval past its time, made once the first has expired:
	// when it has expired too, a sweep has run since, and one expiring the
	// first again would have.
	call2 := &models.Call{ID: "call-expiring-2", Tool: "echo", Status: models.StatusAwaitingApproval, CreatedAt: past}
	approval2 := &models.Approval{ID: "approval-expiring-2", CallID: call2.ID, Tool: "echo", Status: models.ApprovalPending,
		ExpiresAt: past, CreatedAt: past}
	if err := leader.Store.CreateApproval(ctx, approval2, call2, nil, 0); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the second approval expired", failed(call2.ID))
	expired := 0.0
	for _, a := range apps {
		n := counterValue(t, a.App, "toolbelt_approvals_decided_total", "decision", models.ApprovalExpired)
		if n > 0 && a != leader {
			t.Errorf("follower %s expired an approval", a.Config.Instance)
		}
		expired += n
	}
	if expired != 2 {
		t.Errorf("the two approvals were expired %v times, want once each", expired)
	}

	// The leader stops: another takes over within seconds.
	began := time.Now()
	leader.stop()
	var rest []*running
	for _, a := range apps {
		if a != leader {
			rest = append(rest, a)
		}
	}
	next := waitForLeader(t, rest, 5*time.Second)
	t.Logf("instance %s leads %s after %s stopped", next.Config.Instance, time.Since(began).Round(time.Millisecond), leader.Config.Instance)
}

// TestTheOneSQLiteInstanceLeads: on SQLite there is one instance, and it
// runs every job.
func TestTheOneSQLiteInstanceLeads(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), "--instance", "solo")
	a, err := New(context.Background(), cfg, Options{Stdout: io.Discard, LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	r := &running{App: a}
	waitForLeader(t, []*running{r}, 2*time.Second)
	if body := string(serveGet(t, a, "/readyz")); !json.Valid([]byte(body)) || !strings.Contains(body, `"role":"leader"`) || !strings.Contains(body, `"instance":"solo"`) {
		t.Errorf("readiness: %s", body)
	}
}

// TestRestartedInstanceTakesItsClaimsAtOnce: an instance that restarts
// under its name takes its earlier run's claims for dead at start, without
// waiting for their leases (the call whose tool had begun ends
// interrupted, the one that had not runs), and leaves another instance's
// live claim alone.
func TestRestartedInstanceTakesItsClaimsAtOnce(t *testing.T) {
	db := dbtest.Postgres(t)
	// The schema, and the earlier run's claims, before the instance starts.
	store, err := models.OpenPostgres(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	live := time.Now().Add(time.Minute)
	claimed := func(id, owner string, started bool) {
		t.Helper()
		rec := &models.Call{ID: id, PrincipalID: 1, SessionID: "s", Tool: "file_list", Status: models.StatusQueued,
			Request: `{"tool":"file_list","session_id":"s"}`, Arguments: "{}", Result: "{}", CreatedAt: time.Now().UTC()}
		if err := store.SaveCalls(ctx, []*models.Call{rec}); err != nil {
			t.Fatal(err)
		}
		if ok, err := store.ClaimCall(ctx, id, owner, live, "{}"); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if started {
			if ok, err := store.StartCall(ctx, id, owner, time.Now()); err != nil || !ok {
				t.Fatal(ok, err)
			}
		}
	}
	claimed("earlierbegun0001", "solo#earlier", true)
	claimed("earliernotbegun1", "solo#earlier", false)
	claimed("othersclaim00001", "other#1", true)

	apps := startInstances(t, db, "solo")
	want := map[string]string{"earlierbegun0001": models.StatusInterrupted, "earliernotbegun1": models.StatusSucceeded}
	for id, status := range want {
		poll.Until(t, 10*time.Second, "call "+id+" of the earlier run "+status, func() (bool, string) {
			rec, err := apps[0].Store.CallByID(ctx, id)
			return err == nil && rec.Status == status, fmt.Sprintf("%+v %v", rec, err)
		})
	}
	if rec, err := apps[0].Store.CallByID(ctx, "othersclaim00001"); err != nil || rec.Status != models.StatusRunning || rec.ClaimedBy != "other#1" {
		t.Errorf("another instance's live claim: %+v %v", rec, err)
	}
}

// TestPostgresReplaysALeftoverJournal: Postgres keeps no call journal,
// but one an earlier version left in the data directory (answered calls
// only it holds) is replayed at start and removed.
func TestPostgresReplaysALeftoverJournal(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), "--instance", "upgraded")
	cfg.DatabaseURL = dbtest.Postgres(t)
	journal := filepath.Join(cfg.DataDir, "journal")
	if err := os.MkdirAll(journal, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	line := `{"id":"journaledonly0001","principal_id":1,"session_id":"s","tool":"file_list","version":"1.0.0","arguments":"{}",` +
		`"status":"succeeded","created_at":"` + now + `","finished_at":"` + now + `","result":"{\"status\":\"succeeded\"}"}` + "\n"
	if err := os.WriteFile(filepath.Join(journal, "calls-000000007.jsonl"), []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := New(context.Background(), cfg, Options{Stdout: io.Discard, LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, a) // replays the journal before it serves
	if rec, err := a.Store.CallByID(context.Background(), "journaledonly0001"); err != nil || rec.Status != models.StatusSucceeded {
		t.Fatalf("the journaled call: %+v %v", rec, err)
	}
	// A call made now is not journaled.
	admin, err := a.Store.PrincipalByID(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := a.Invoker.CallAcknowledged(context.Background(), admin, invoke.CallRequest{Tool: "file_list", SessionID: "s"}); err != nil || !res.Success {
		t.Fatalf("call: %+v %v", res, err)
	}
	// The replayed segment is gone; this run's (it only spools) is empty.
	if _, err := os.Stat(filepath.Join(journal, "calls-000000007.jsonl")); !os.IsNotExist(err) {
		t.Errorf("the replayed segment is still there: %v", err)
	}
	segs, _ := filepath.Glob(filepath.Join(journal, "*.jsonl"))
	for _, seg := range segs {
		if st, err := os.Stat(seg); err == nil && st.Size() > 0 {
			t.Errorf("a call made now was journaled: %s holds %d bytes", seg, st.Size())
		}
	}
}
