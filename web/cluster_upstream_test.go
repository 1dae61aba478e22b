package web_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"toolbelt/internal/poll"
	"toolbelt/models"
	"toolbelt/services/netpolicy"
)

// TestClusterUpstreams: two instances over one Postgres share an
// upstream server's registration, and each runs its own stdio process
// for it (server-memory from npm, in the sandbox). A server registered
// anew, or disabled, on one instance has the other's process of it
// stopped (upstream.SweepEvery) and its calls refused (upstream.Fresh);
// one deleted there leaves the other's catalog.
func TestClusterUpstreams(t *testing.T) {
	apps := newClusterWith(t, 2, false, netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	needSandbox(t, apps[0])
	// An argument the server ignores marks this test's processes.
	marker := "cluster-" + models.NewID()
	stdioServer(t, apps[0], "memory", "code", "shared", []string{"node", serversAt + "server-memory/dist/index.js", marker},
		map[string]string{"MEMORY_FILE_PATH": "/work/memory.jsonl"}, 0)
	call := func(a *testApp) (int, map[string]any) {
		t.Helper()
		return a.call(t, "admin", map[string]any{"tool": "memory__read_graph", "arguments": map[string]any{}, "session_id": "s"})
	}
	if n := processes(marker); n != 1 {
		t.Fatalf("after adding on the first instance: %d processes, want its one", n)
	}
	within(t, "the second instance's catalog", func() (bool, string) {
		r := apps[1].do(t, "admin", "GET", "/api/v1/tools/memory__read_graph", nil)
		return r.Status == 200, string(r.Body)
	})
	if code, res := call(apps[1]); code != 200 {
		t.Fatalf("a call on the second instance: %d %v", code, res)
	}
	if n := processes(marker); n != 2 {
		t.Fatalf("after a call on the second instance: %d processes, want one per instance", n)
	}
	for i, a := range apps {
		if r := a.do(t, "admin", "GET", "/api/v1/upstreams/memory", nil); r.Status != 200 || r.JSON(t)["connections"] != float64(1) {
			t.Errorf("instance %d's connections: %d %s", i, r.Status, r.Body)
		}
	}

	// Registered anew on the first instance: the second's process of the
	// old registration stops, and its next call runs the new one.
	renewed := "cluster-" + models.NewID()
	if r := apps[0].do(t, "admin", "PUT", "/api/v1/upstreams/memory", map[string]any{"transport": "stdio", "category": "code",
		"command": []string{"node", serversAt + "server-memory/dist/index.js", renewed}, "mounts": map[string]string{"node": nodePackages(t)},
		"env": map[string]string{"MEMORY_FILE_PATH": "/work/memory.jsonl"}}); r.Status != 200 {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	poll.True(t, 20*time.Second, "the old registration's processes stopped on both instances", func() bool { return processes(marker) == 0 })
	if code, res := call(apps[1]); code != 200 || processes(renewed) != 1 {
		t.Fatalf("a call on the second instance after the update: %d %v, %d processes of the new registration", code, res, processes(renewed))
	}

	if r := apps[0].do(t, "admin", "POST", "/api/v1/upstreams/memory/disable", nil); r.Status != 204 && r.Status != 200 {
		t.Fatalf("disable: %d %s", r.Status, r.Body)
	}
	poll.True(t, 20*time.Second, "calls on the second instance refused", func() bool {
		_, res := call(apps[1])
		return res["success"] == false && strings.Contains(string(mustJSON(res)), "is disabled")
	})
	poll.True(t, 20*time.Second, "the disabled server's process stopped on the second instance", func() bool { return processes(renewed) == 0 })

	if r := apps[0].do(t, "admin", "POST", "/api/v1/upstreams/memory/enable", nil); r.Status != 204 && r.Status != 200 {
		t.Fatalf("enable: %d %s", r.Status, r.Body)
	}
	if r := apps[1].do(t, "admin", "DELETE", "/api/v1/upstreams/memory", nil); r.Status != 204 {
		t.Fatalf("delete on the second instance: %d %s", r.Status, r.Body)
	}
	within(t, "the tool leaving the first instance's catalog", func() (bool, string) {
		r := apps[0].do(t, "admin", "GET", "/api/v1/tools/memory__read_graph", nil)
		return r.Status == 404, string(r.Body)
	})
}
