package web_test

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"toolbelt/app"
	"toolbelt/internal/dbtest"
	"toolbelt/internal/poll"
	"toolbelt/services/access"
	"toolbelt/services/netpolicy"
)

// clusterAdminKey is the admin key every instance of a test cluster is
// configured with (openssl rand -hex 32: the server refuses a guessable
// one).
const clusterAdminKey = "tb_0e9574dcc83363a5b0354e4534a5919847d906cb890c95bb9fc8b53500bebada"

// clusterOAuthKey is the TOOLBELT_OAUTH_KEY the instances share, as a
// cluster must: the signing key the first stores is encrypted with it.
const clusterOAuthKey = "9c2e5a8d1f4b7e0c3a6d9f2b5e8a1c4d7f0b3e6a9c2d5f8b1e4a7c0d3f6b9e2a"

// clusterVaultKey is the TOOLBELT_VAULT_KEY the instances share: each
// would otherwise make a vault.key of its own, which does not open what
// the first sealed, and refuse to start.
const clusterVaultKey = "ddd358b963e94442101bb8541fc6d2f8cee1712b6b54232605f06d1771b4c041"

// newCluster starts n instances over one new Postgres database and, with
// redis, one Redis server, each with its own data directory and handler,
// running (serve) as n machines would run them. The first makes the
// principals; every instance knows their keys.
func newCluster(t *testing.T, n int, redis bool) []*testApp {
	t.Helper()
	return newClusterWith(t, n, redis, netpolicy.Policy{})
}

// newClusterWith starts the cluster of newCluster with policy as every
// instance's egress policy and their configs changed by edits.
func newClusterWith(t *testing.T, n int, redis bool, policy netpolicy.Policy, edits ...func(*app.Config)) []*testApp {
	t.Helper()
	apps := clusterApps(t, n, redis, policy, edits...)
	for _, a := range apps {
		a.serve(t) // they hear each other's change notices
	}
	return apps
}

// clusterApps is newClusterWith's instances before they run, for a test
// that must reach their stores first.
func clusterApps(t *testing.T, n int, redis bool, policy netpolicy.Policy, edits ...func(*app.Config)) []*testApp {
	t.Helper()
	dbURL := dbtest.Postgres(t)
	var redisURL string
	if redis {
		redisURL = dbtest.Redis(t)
	}
	started := 0
	shared := func(c *app.Config) {
		c.DatabaseURL, c.RedisURL, c.AdminKey, c.OAuthKey, c.VaultKey = dbURL, redisURL, clusterAdminKey, clusterOAuthKey, clusterVaultKey
		// One process, several instances: each its own name, as on
		// several machines.
		c.Instance = fmt.Sprintf("node-%d", started)
		started++
		for _, edit := range edits {
			edit(c)
		}
	}
	host := hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true}
	apps := []*testApp{newTestAppWith(t, host, policy, shared)}
	apps[0].keys["admin"] = clusterAdminKey
	for range n - 1 {
		a := startTestApp(t, host, policy, shared)
		a.keys, a.ids = apps[0].keys, apps[0].ids
		apps = append(apps, a)
	}
	return apps
}

// within waits up to a second, the time a change on one instance may
// take to reach another, for check to hold.
func within(t *testing.T, what string, check func() (bool, string)) {
	t.Helper()
	poll.Until(t, time.Second, what, check)
}

// echoTool is a command tool printing its text, changed by edits.
func echoTool(name, version string, edits ...func(m map[string]any)) map[string]any {
	return toolDef(name, append([]func(map[string]any){func(m map[string]any) {
		m["version"] = version
		m["description"] = "Repeat a line of text back. Input: text. Output: the same text."
		m["examples"] = []any{"say the word back to me"}
		m["runner"] = map[string]any{"kind": "command", "argv": []any{"echo", "{{text}}"}}
	}}, edits...)...)
}

// A tool's rate limit counts the calls of every instance, in Redis or,
// without it, in Postgres: the N+1th call in the window is refused
// whichever instance it reaches.
func TestClusterRateLimitIsExact(t *testing.T) {
	for name, redis := range map[string]bool{"redis": true, "postgres only": false} {
		t.Run(name, func(t *testing.T) { clusterRateLimitIsExact(t, redis) })
	}
}

func clusterRateLimitIsExact(t *testing.T, redis bool) {
	apps := newCluster(t, 3, redis)
	const maxCalls = 4
	def := echoTool("limited_echo", "1.0.0", func(m map[string]any) {
		m["security"].(map[string]any)["rateLimit"] = map[string]any{"maxCalls": maxCalls, "windowMs": 60000}
	})
	if r := apps[0].do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatal(string(r.Body))
	}
	for i := range maxCalls {
		a := apps[i%len(apps)]
		if code, res := a.call(t, "admin", map[string]any{"tool": "limited_echo", "arguments": map[string]any{"text": "hi"}}); code != 200 {
			t.Fatalf("call %d on instance %d: %d %v", i+1, i%len(apps), code, res)
		}
	}
	for i, a := range apps {
		r := a.do(t, "admin", "POST", "/api/v1/calls", map[string]any{"tool": "limited_echo", "arguments": map[string]any{"text": "hi"}})
		if res := r.JSON(t); r.Status != 429 || errCode(res) != "RATE_LIMIT_EXCEEDED" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("call past the limit on instance %d: %d %v", i, r.Status, res)
		}
	}
}

// With Redis, a cacheable result computed on one instance is a hit on
// another, in the same session only; publishing a new version on either
// makes both miss.
func TestClusterResultsCacheIsShared(t *testing.T) {
	apps := newCluster(t, 2, true)
	a, b := apps[0], apps[1]
	cacheable := func(m map[string]any) {
		m["execution"] = map[string]any{"timeout": 5000, "cacheable": true, "cacheTTL": 60000}
	}
	if r := a.do(t, "admin", "POST", "/api/v1/tools", echoTool("cached_echo", "1.0.0", cacheable)); r.Status != 201 {
		t.Fatal(string(r.Body))
	}
	call := func(on *testApp) map[string]any {
		t.Helper()
		code, res := on.call(t, "admin", map[string]any{"tool": "cached_echo", "arguments": map[string]any{"text": "shared"}})
		if code != 200 || res["success"] != true {
			t.Fatalf("call: %d %v", code, res)
		}
		return res["metadata"].(map[string]any)
	}
	if md := call(a); md["cached"] != false {
		t.Fatalf("first call cached: %v", md)
	}
	if md := call(b); md["cached"] != true {
		t.Fatalf("the same call on another instance missed the cache: %v", md)
	}
	// A command's output is the session's own: another session runs it,
	// on either instance.
	code, res := b.call(t, "admin", map[string]any{"tool": "cached_echo", "session_id": "other", "arguments": map[string]any{"text": "shared"}})
	if code != 200 || res["metadata"].(map[string]any)["cached"] != false {
		t.Fatalf("the same call in another session was answered from the shared cache: %d %v", code, res)
	}
	if r := a.do(t, "admin", "PUT", "/api/v1/tools/cached_echo", echoTool("cached_echo", "1.0.1", cacheable)); r.Status != 200 && r.Status != 201 {
		t.Fatal(r.Status, string(r.Body))
	}
	within(t, "the new version on the other instance", func() (bool, string) {
		md := call(b)
		return md["tool_version"] == "1.0.1" && md["cached"] == false, fmt.Sprint(md)
	})
	if md := call(a); md["cached"] != true || md["tool_version"] != "1.0.1" {
		t.Errorf("the new version's result, computed on B, missed on A: %v", md)
	}
}

// The catalog is one: a tool registered, published, rolled back or
// retired on one instance is listed and selected on the others within a
// second, over Redis pub/sub or, without Redis, Postgres LISTEN/NOTIFY.
func TestClusterCatalogPropagates(t *testing.T) {
	for _, redis := range []bool{true, false} {
		t.Run(map[bool]string{true: "redis", false: "postgres"}[redis], func(t *testing.T) {
			apps := newCluster(t, 2, redis)
			a, b := apps[0], apps[1]
			// B builds its index now, so only a notice can make it see the tool.
			selected := func(on *testApp) []string {
				return selectedNames(t, on.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": "repeat a line of text back to me", "limit": 3}))
			}
			if slices.Contains(selected(b), "parrot") {
				t.Fatal("selected before it exists")
			}
			if r := a.do(t, "admin", "POST", "/api/v1/tools", echoTool("parrot", "1.0.0")); r.Status != 201 {
				t.Fatal(string(r.Body))
			}
			within(t, "a tool registered on A selected on B", func() (bool, string) {
				got := selected(b)
				return slices.Contains(got, "parrot"), fmt.Sprint(got)
			})
			if r := b.do(t, "admin", "GET", "/api/v1/tools/parrot", nil); r.Status != 200 {
				t.Errorf("a tool registered on A is not shown on B: %d", r.Status)
			}
			version := func(on *testApp) (bool, string) {
				code, res := on.call(t, "admin", map[string]any{"tool": "parrot", "arguments": map[string]any{"text": "x"}})
				md, _ := res["metadata"].(map[string]any)
				return code == 200, fmt.Sprint(md["tool_version"])
			}
			if _, v := version(b); v != "1.0.0" {
				t.Fatalf("B calls version %s", v)
			}
			if r := a.do(t, "admin", "PUT", "/api/v1/tools/parrot", echoTool("parrot", "1.1.0")); r.Status != 200 && r.Status != 201 {
				t.Fatal(r.Status, string(r.Body))
			}
			within(t, "a version published on A called on B", func() (bool, string) {
				_, v := version(b)
				return v == "1.1.0", v
			})
			if r := a.do(t, "admin", "POST", "/api/v1/tools/parrot/rollback", map[string]any{"version": "1.0.0"}); r.Status != 200 {
				t.Fatal(r.Status, string(r.Body))
			}
			within(t, "a rollback on A called on B", func() (bool, string) {
				_, v := version(b)
				return v == "1.0.0", v
			})
			if r := a.do(t, "admin", "DELETE", "/api/v1/tools/parrot", nil); r.Status != 200 && r.Status != 204 {
				t.Fatal(r.Status, string(r.Body))
			}
			within(t, "a tool retired on A gone from selection on B", func() (bool, string) {
				got := selected(b)
				return !slices.Contains(got, "parrot"), fmt.Sprint(got)
			})
			if ok, _ := version(b); ok {
				t.Error("a tool retired on A is still called on B")
			}
		})
	}
}

// Wrong API keys count across instances, in Redis or, without it, in
// Postgres: a guesser spreading its guesses over them is refused 429
// after access.KeyGuesses in all.
func TestClusterKeyGuessesAreShared(t *testing.T) {
	for name, redis := range map[string]bool{"redis": true, "postgres only": false} {
		t.Run(name, func(t *testing.T) { clusterKeyGuessesAreShared(t, redis) })
	}
}

func clusterKeyGuessesAreShared(t *testing.T, redis bool) {
	apps := newCluster(t, 3, redis)
	from := func(a *testApp, key string) int {
		req := httptest.NewRequest("GET", "/api/v1/me", nil)
		req.RemoteAddr = "203.0.113.7:40000"
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		a.handler.ServeHTTP(rec, req)
		return rec.Code
	}
	for i := range access.KeyGuesses().Limit {
		if code := from(apps[int(i)%len(apps)], "tb_guess"+strconv.Itoa(int(i))+strings.Repeat("0", 60)); code != 401 {
			t.Fatalf("guess %d: %d, want 401", i, code)
		}
	}
	for i, a := range apps {
		if code := from(a, "tb_guess"+strings.Repeat("1", 63)); code != 429 {
			t.Errorf("a guess past the limit on instance %d: %d, want 429", i, code)
		}
		if code := from(a, clusterAdminKey); code != 200 {
			t.Errorf("the right key on instance %d: %d", i, code)
		}
	}
}

// Grants given on one instance hold on the others within a second, the
// first grants of an agent too (which Casbin's UpdateFilteredPolicies
// stored without telling its watcher).
func TestClusterGrantsPropagate(t *testing.T) {
	apps := newCluster(t, 2, true)
	a, b := apps[0], apps[1]
	if r := a.do(t, "admin", "POST", "/api/v1/tools", echoTool("granted_echo", "1.0.0")); r.Status != 201 {
		t.Fatal(string(r.Body))
	}
	call := func() (bool, string) {
		code, res := b.call(t, "agent", map[string]any{"tool": "granted_echo", "arguments": map[string]any{"text": "x"}})
		return code == 200, fmt.Sprint(code, res["status"])
	}
	if ok, _ := call(); ok {
		t.Fatal("called before the grant")
	}
	for _, categories := range [][]string{{"code"}, {"code", "shell"}} {
		if r := a.do(t, "admin", "PUT", fmt.Sprintf("/api/v1/principals/%d/grants", a.ids["agent"]), map[string]any{"categories": categories}); r.Status != 200 {
			t.Fatal(r.Status, string(r.Body))
		}
		within(t, fmt.Sprintf("the grant of %v on A holding on B", categories), call)
	}
	if r := a.do(t, "admin", "PUT", fmt.Sprintf("/api/v1/principals/%d/grants", a.ids["agent"]), map[string]any{"categories": []string{"shell"}}); r.Status != 200 {
		t.Fatal(r.Status, string(r.Body))
	}
	within(t, "a grant withdrawn on A refused on B", func() (bool, string) { ok, got := call(); return !ok, got })
}

// Learned queries are one: feedback given on one instance ranks the tool
// on the others within a second, and a query forgotten on one is gone on
// the others, with Redis and over Postgres alone.
func TestClusterLearnedQueriesPropagate(t *testing.T) {
	for name, redis := range map[string]bool{"redis": true, "postgres only": false} {
		t.Run(name, func(t *testing.T) { clusterLearnedQueriesPropagate(t, redis) })
	}
}

func clusterLearnedQueriesPropagate(t *testing.T, redis bool) {
	apps := newCluster(t, 2, redis)
	a, b := apps[0], apps[1]
	def := toolDef("ledger_sync", func(m map[string]any) {
		m["description"] = "Synchronise the accounting ledger with the bank statement export."
		m["category"] = "api"
		m["examples"] = []any{}
		m["tags"] = []any{}
	})
	if r := a.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatal(string(r.Body))
	}
	const query = "tidy up my quarterly receipts spreadsheet"
	learnedOn := func(app *testApp) []string {
		r := app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": "please tidy my quarterly receipts", "limit": 3})
		tools, _ := r.JSON(t)["tools"].([]any) // none when nothing fits
		for _, tool := range tools {
			if m := tool.(map[string]any); m["name"] == "ledger_sync" {
				lq, _ := m["reasons"].(map[string]any)["learned_queries"].([]any) // absent when none
				return toStrings(lq)
			}
		}
		return nil
	}
	// b has ranked once, so its learned queries are loaded before a learns.
	if got := learnedOn(b); len(got) > 0 {
		t.Fatalf("learned before any feedback: %v", got)
	}
	r := a.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": query, "limit": 3, "session_id": "s1"})
	id := r.JSON(t)["selection_id"].(string)
	if r := a.do(t, "admin", "POST", "/api/v1/selections/"+id+"/feedback", map[string]any{"tools": []string{"ledger_sync"}}); r.Status != 200 {
		t.Fatalf("feedback: %d %s", r.Status, r.Body)
	}
	within(t, "b ranks ledger_sync by the query a learned", func() (bool, string) {
		got := learnedOn(b)
		return slices.Equal(got, []string{query}), fmt.Sprint(got)
	})
	list := b.do(t, "admin", "GET", "/api/v1/tools/ledger_sync/queries", nil).JSON(t)["queries"].([]any)
	qid := fmt.Sprint(list[0].(map[string]any)["id"])
	if r := b.do(t, "admin", "DELETE", "/api/v1/tools/ledger_sync/queries/"+qid, nil); r.Status != 204 {
		t.Fatalf("forget on b: %d %s", r.Status, r.Body)
	}
	within(t, "a forgets the query b removed", func() (bool, string) {
		got := learnedOn(a)
		return len(got) == 0, fmt.Sprint(got)
	})
}
