package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/poll"
	"toolbelt/models"
	"toolbelt/services/cluster"
)

// TestFrozenLeaderLosesLeadership runs two instances of the real binary
// over one Postgres database on which a tool's alert is firing. a leads
// and posts the alert. SIGSTOP a: b leads within LeaderLease + Retry, and
// does not post the alert again. SIGCONT a: it says at once that it
// follows, and the two never both lead. The tool recovers and b is
// SIGKILLed: a leads again, within the same bound, and posts the
// resolution, once.
func TestFrozenLeaderLosesLeadership(t *testing.T) {
	bin := buildBinary(t)
	db := dbtest.Postgres(t)
	const key = testAdminKey
	// The bound, and an allowance for a busy machine to schedule the
	// instances and answer the polls.
	const bound, slack = cluster.LeaderLease + cluster.Retry, 2 * time.Second

	var mu sync.Mutex
	var posted []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var al struct{ Tool, Status string }
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &al); err != nil {
			t.Errorf("webhook body %s: %v", raw, err)
		}
		mu.Lock()
		posted = append(posted, al.Tool+" "+al.Status)
		mu.Unlock()
	}))
	defer hook.Close()
	posts := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(posted)
	}

	// The calls an alert is computed from, stored before the instances
	// start (the monitor of a new leader checks at once).
	ctx := context.Background()
	store, err := models.OpenPostgres(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	calls := func(status string, n int) {
		t.Helper()
		var cs []*models.Call
		for range n {
			cs = append(cs, &models.Call{ID: models.NewID(), Tool: "web_search", Status: status, CreatedAt: time.Now().UTC().Add(-time.Minute)})
		}
		if err := store.SaveCalls(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}
	calls(models.StatusFailed, 6)

	client := &http.Client{Timeout: 5 * time.Second}
	get := func(s *server, path string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest("GET", s.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return body
	}
	role := func(s *server) string {
		r, _ := get(s, "/readyz")["role"].(string)
		return r
	}
	alerts := func(s *server) []any {
		a, _ := get(s, "/api/v1/stats?hours=1")["alerts"].([]any)
		return a
	}
	env := func(name string) []string {
		return []string{"TOOLBELT_DATABASE_URL=" + db, "TOOLBELT_INSTANCE=" + name, "TOOLBELT_ADMIN_KEY=" + key,
			"TOOLBELT_ALERT_MIN_CALLS=5", "TOOLBELT_ALERT_WEBHOOK=" + hook.URL}
	}

	a := start(t, bin, t.TempDir(), env("a")...)
	poll.True(t, 10*time.Second, "a leads", func() bool { return role(a) == cluster.Leader })
	poll.True(t, 10*time.Second, "a posts the alert", func() bool { return len(posts()) > 0 })
	// a's monitor shows the alert once it has posted it and recorded so.
	poll.True(t, 10*time.Second, "a shows the alert", func() bool { return len(alerts(a)) == 1 })
	b := start(t, bin, t.TempDir(), env("b")...)
	if r := role(b); r != cluster.Follower {
		t.Fatalf("b is %q while a leads", r)
	}

	frozen := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	poll.True(t, bound+slack, "b leads while a is frozen", func() bool { return role(b) == cluster.Leader })
	t.Logf("b leads %s after a was frozen (bound %s)", time.Since(frozen).Round(time.Millisecond), bound)
	// b's monitor has checked once it shows the alert, after any post.
	poll.True(t, 10*time.Second, "b shows the alert", func() bool { return len(alerts(b)) == 1 })
	if got := posts(); !slices.Equal(got, []string{"web_search firing"}) {
		t.Fatalf("after the failover the webhook got %v", got)
	}

	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if r := role(a); r != cluster.Follower {
		t.Errorf("a, woken, says it is %q", r)
	}
	// For two renewals of both, one leader, b.
	for end := time.Now().Add(2 * cluster.Retry); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if ra, rb := role(a), role(b); ra != cluster.Follower || rb != cluster.Leader {
			t.Fatalf("after a woke: a is %q, b is %q", ra, rb)
		}
	}

	// The tool recovers; b dies: a leads and posts the resolution.
	calls(models.StatusSucceeded, 14)
	killed := time.Now()
	if err := b.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	poll.True(t, bound+slack, "a leads after b was killed", func() bool { return role(a) == cluster.Leader })
	t.Logf("a leads %s after b was killed", time.Since(killed).Round(time.Millisecond))
	poll.True(t, 10*time.Second, "a posts the resolution", func() bool { return len(posts()) > 1 })
	poll.True(t, 10*time.Second, "a shows no alert", func() bool { return len(alerts(a)) == 0 })
	if got := posts(); !slices.Equal(got, []string{"web_search firing", "web_search resolved"}) {
		t.Fatalf("the webhook got %v", got)
	}
	// The webhook has the resolution before a records it posted (and
	// removes the resolved state): wait for that, not the post.
	poll.True(t, 10*time.Second, "the resolved alert's state removed", func() bool {
		states, err := store.AlertStates(ctx, "failure_rate")
		return err == nil && len(states) == 0
	})
}
