package invoke

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/access"
	"toolbelt/services/catalog"
	"toolbelt/services/embed"
	"toolbelt/services/redact"
	"toolbelt/services/runners"
	"toolbelt/services/selection"
	"toolbelt/services/tooldef"
)

// BenchmarkCallChain measures the guard chain around a no-op built-in
// (echo), uncached, in process: resolve, validate, authorize, approve,
// secure, cache (a miss), limit, queue, execute, redaction and the
// history record (written off the call path). It reports p50 and p99.
func BenchmarkCallChain(b *testing.B) {
	ctx := context.Background()
	store, _ := modelstest.Store(&testing.T{})
	b.Cleanup(func() { _ = store.Close() })
	authz, _ := access.OpenAuthz(ctx, access.AuthzDeps{Store: store})
	reg := catalog.NewRegistry(store, quiet)
	def := tooldef.Definition{
		Name: "noop", Version: "1.0.0", Description: "Answer the arguments.", Category: "code",
		Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"},"note":{"type":"string"}},"required":["n"]}`),
		Security:   tooldef.Security{Level: tooldef.LevelSafe, RateLimit: &tooldef.RateLimit{MaxCalls: 100_000, WindowMs: 60_000}},
		Runner:     tooldef.Runner{Kind: tooldef.RunnerBuiltin, Builtin: "echo"},
	}
	if _, err := reg.Register(ctx, def, nil); err != nil {
		b.Fatal(err)
	}
	red, err := redact.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	sel := selection.New(selection.Deps{Store: store, Authz: authz, Embedder: embed.NewBuiltin(), Host: allHost(), Log: quiet})
	inv := New(Deps{Store: store, Selector: sel, Authz: authz, Redactor: red, Runners: runners.NewTable(runners.Deps{DataDir: b.TempDir(), Log: quiet}), DataDir: b.TempDir(), Log: quiet})
	b.Cleanup(func() { inv.Close(ctx) })
	running(b, sel.Run)
	running(b, inv.Run)
	agent := &models.Principal{ID: 9, Role: access.RoleAgent}
	if err := authz.SetGrants(9, access.Grants{Tools: []string{"noop"}}); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	i := 0
	for b.Loop() {
		args := json.RawMessage(fmt.Sprintf(`{"n":%d,"note":"call number %d"}`, i, i))
		start := time.Now()
		res := inv.Call(ctx, agent, CallRequest{Tool: "noop", Arguments: args, SessionID: "bench"})
		lat = append(lat, time.Since(start))
		if !res.Success {
			b.Fatalf("call failed: %+v", res.Error)
		}
		i++
	}
	sort.Slice(lat, func(a, c int) bool { return lat[a] < lat[c] })
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1000, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1000, "p99-µs")
}
