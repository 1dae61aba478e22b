package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
)

// TestLeaderKilledHandsOver runs two instances of the real binary over one
// Postgres database: one leads; SIGKILL it, and Postgres, ending its
// session, frees the leader lock for the other within seconds. Each
// instance's metrics carry its name.
func TestLeaderKilledHandsOver(t *testing.T) {
	bin := buildBinary(t)
	db := dbtest.Postgres(t)
	const key = "tb_one-admin-key-for-the-whole-cluster"
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
		deadline := time.Now().Add(10 * time.Second)
		for {
			var leading []string
			for _, n := range names {
				if role(servers[n]) == "leader" {
					leading = append(leading, n)
				}
			}
			if len(leading) == 1 {
				return leading[0]
			}
			if len(leading) > 1 || time.Now().After(deadline) {
				t.Fatalf("instances leading: %v", leading)
			}
			time.Sleep(50 * time.Millisecond)
		}
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
