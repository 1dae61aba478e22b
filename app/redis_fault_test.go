package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/poll"
	"toolbelt/models"
	"toolbelt/services/invoke"
	"toolbelt/services/netpolicy"
	"toolbelt/services/tooldef"
)

// Redis is an accelerator, not a single point of failure: over Postgres
// with Redis, an outage of Redis, its return and a restart that lost its
// keys fail no call. Synchronous calls in a category with a shared queue
// succeed throughout; a tool limited to N calls a minute answers exactly
// N successes, then RATE_LIMITED, whichever instance is called before,
// during and after the outage; and a version published on one instance
// while Redis is down is called on the other (its change notice goes
// over Postgres).
func TestRedisFaultsFailNoCall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	db, rs := dbtest.Postgres(t), dbtest.RedisServer(t)
	apps := startInstancesWith(t, func(cfg *Config) {
		cfg.DatabaseURL, cfg.RedisURL = db, rs.URL()
		cfg.NetPolicy = netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	}, "a", "b")
	a, b := apps[0], apps[1]
	ctx := context.Background()
	const maxCalls = 6
	tool := func(name, version string, limit *tooldef.RateLimit) tooldef.Definition {
		return tooldef.Definition{
			Name: name, Version: version, Description: "Fetch the status page of the service. Input: none. Output: its status.",
			Category:   "api",
			Parameters: json.RawMessage(`{"type":"object","properties":{}}`),
			Execution:  tooldef.Execution{Timeout: 10_000},
			Security:   tooldef.Security{RateLimit: limit},
			Runner:     tooldef.Runner{Kind: tooldef.RunnerHTTP, Method: "GET", URL: srv.URL + "/status"},
		}
	}
	if _, err := a.Registry.Register(ctx, tool("limited_status", "1.0.0", &tooldef.RateLimit{MaxCalls: maxCalls, WindowMs: 60_000}), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Registry.Register(ctx, tool("status", "1.0.0", nil), nil); err != nil {
		t.Fatal(err)
	}
	admin, err := a.Store.PrincipalByID(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	call := func(on *running, name string) invoke.ToolResult {
		t.Helper()
		return on.Invoker.Call(ctx, admin, invoke.CallRequest{Tool: name, Arguments: json.RawMessage(`{}`)})
	}
	allowed, limited := 0, 0
	limitedCall := func(on *running) {
		t.Helper()
		switch res := call(on, "limited_status"); {
		case res.Success:
			allowed++
		case res.Error != nil && res.Error.Code == models.CodeRateLimit:
			limited++
		default:
			t.Fatalf("a call on %s failed: %+v", on.Config.Instance, res.Error)
		}
	}
	plainCall := func(on *running) string {
		t.Helper()
		res := call(on, "status")
		if !res.Success {
			t.Fatalf("a call on %s failed: %+v", on.Config.Instance, res.Error)
		}
		return res.Metadata.ToolVersion
	}

	limitedCall(a)
	limitedCall(b)
	rs.Stop()
	for range 5 {
		plainCall(a)
		plainCall(b)
	}
	limitedCall(a)
	limitedCall(b)
	if _, err := a.Registry.Publish(ctx, "status", tool("status", "1.1.0", nil), nil); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 30*time.Second, "the version published on a called on b", func() bool { return plainCall(b) == "1.1.0" })
	rs.Start()
	limitedCall(a)
	plainCall(b)
	rs.Restart()
	for range 3 {
		limitedCall(b)
		limitedCall(a)
		plainCall(b)
	}
	if allowed != maxCalls || limited != 11-maxCalls {
		t.Errorf("%d calls allowed and %d limited; want %d and %d", allowed, limited, maxCalls, 11-maxCalls)
	}
}
