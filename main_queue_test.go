package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/poll"
)

// TestQueueSlotsOfAKilledInstanceFree runs two instances of the real
// binary sharing the category queues (over Redis, and over Postgres
// alone): three calls of a category limited to 3 run on A, inside the
// service their tool calls; a fourth, made on B, waits. SIGKILL A: its
// slots lapse with their leases, nothing released them, and B's call
// runs, never more than 3 inside at once. Counted on the host, by the
// service the tool calls.
func TestQueueSlotsOfAKilledInstanceFree(t *testing.T) {
	t.Parallel() // its own server, data directory and database
	bin := buildBinary(t)
	for _, withRedis := range []bool{true, false} {
		t.Run(map[bool]string{true: "redis", false: "postgres"}[withRedis], func(t *testing.T) {
			var mu sync.Mutex
			inside, peak := 0, 0
			arrived := make(chan int, 8)
			hold := make(chan struct{})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n, _ := strconv.Atoi(r.URL.Query().Get("n"))
				mu.Lock()
				inside++
				peak = max(peak, inside)
				mu.Unlock()
				arrived <- n
				select {
				case <-hold:
				case <-r.Context().Done(): // the instance calling died
				}
				mu.Lock()
				inside--
				mu.Unlock()
				_, _ = w.Write([]byte(`{"ok":true}`))
			}))
			defer up.Close()
			defer close(hold)
			const key = testAdminKey
			env := []string{"TOOLBELT_DATABASE_URL=" + dbtest.Postgres(t), "TOOLBELT_ADMIN_KEY=" + key, "TOOLBELT_HTTP_ALLOW_PRIVATE=127.0.0.1/32"}
			if withRedis {
				env = append(env, "TOOLBELT_REDIS_URL="+dbtest.Redis(t))
			}
			a := start(t, bin, t.TempDir(), append(env, "TOOLBELT_INSTANCE=a")...)
			b := start(t, bin, t.TempDir(), append(env, "TOOLBELT_INSTANCE=b")...)
			ca, cb := newFaultClient(a.base), newFaultClient(b.base)
			tool := map[string]any{
				"name": "slow_page", "version": "1.0.0", "category": "browser",
				"description": "Fetch a numbered page and wait for it. Input: n. Output: the page.",
				"parameters":  map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}, "required": []any{"n"}},
				"execution":   map[string]any{"timeout": 60000},
				"runner":      map[string]any{"kind": "http", "method": "GET", "url": up.URL + "/run?n={{n}}"},
			}
			if code, res, err := ca.do("POST", "/api/v1/tools", key, tool); err != nil || code != 201 {
				t.Fatalf("register: %d %v %v", code, res, err)
			}
			call := func(c *faultClient, n int) {
				t.Helper()
				code, res, err := c.do("POST", "/api/v1/calls", key, map[string]any{"tool": "slow_page", "async": true, "session_id": "q", "arguments": map[string]any{"n": n}})
				if err != nil || code != 202 {
					t.Fatalf("call %d: %d %v %v", n, code, res, err)
				}
			}
			for n := range 3 {
				call(ca, n)
				if got := <-arrived; got != n {
					t.Fatalf("call %d came in as %d", n, got)
				}
			}
			call(cb, 3)
			waiting := regexp.MustCompile(`(?m)^toolbelt_queue_cluster_waiting\{category="browser"[^}]*\} 1$`)
			poll.Until(t, 30*time.Second, "B's call counted waiting", func() (bool, string) {
				m := metrics(t, b.base, key)
				return waiting.MatchString(m), m
			})
			killed := time.Now()
			if err := a.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-arrived:
				if got != 3 {
					t.Fatalf("call %d came in; want B's 3", got)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("B's call never ran after A was killed")
			}
			t.Logf("B's call ran %s after A was killed holding every slot", time.Since(killed).Round(time.Millisecond))
			mu.Lock()
			defer mu.Unlock()
			if peak > 3 {
				t.Errorf("%d inside at once; the limit is 3", peak)
			}
		})
	}
}

// metrics is an instance's /metrics text.
func metrics(t *testing.T, base, key string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, body)
	}
	return string(body)
}
