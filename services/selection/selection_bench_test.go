package selection

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"testing"
	"time"

	"toolbelt/models/modelstest"
	"toolbelt/services/access"
	"toolbelt/services/catalog"
	"toolbelt/services/embed"
	"toolbelt/services/tooldef"
)

// benchCatalog registers n varied tools through the registry.
func benchCatalog(b *testing.B, n int) (*Selector, []string) {
	b.Helper()
	return benchCatalogWith(b, n, embed.NewBuiltin())
}

// benchCatalogWith is benchCatalog with a selector embedding with emb.
func benchCatalogWith(b *testing.B, n int, emb embed.Embedder) (*Selector, []string) {
	b.Helper()
	ctx := context.Background()
	store, _ := modelstest.Store(&testing.T{})
	b.Cleanup(func() { _ = store.Close() })
	authz, err := access.OpenAuthz(ctx, access.AuthzDeps{Store: store})
	if err != nil {
		b.Fatal(err)
	}
	reg := catalog.NewRegistry(store, quiet)
	nouns := []string{"invoice", "weather", "repository", "calendar", "ticket", "image", "database", "email", "invoice", "contract", "playlist", "flight", "recipe", "sensor", "budget"}
	verbs := []string{"search", "create", "summarise", "translate", "export", "validate", "schedule", "compare", "archive", "monitor"}
	for i := range n {
		noun, verb := nouns[i%len(nouns)], verbs[(i/len(nouns))%len(verbs)]
		def := tooldef.Definition{
			Name:        fmt.Sprintf("%s_%s_%05d", verb, noun, i),
			Version:     "1.0.0",
			Description: fmt.Sprintf("%s %s records in workspace %d; returns matching %s entries with links.", verb, noun, i%97, noun),
			Category:    tooldef.Categories[i%len(tooldef.Categories)],
			Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What to look for"}},"required":["query"]}`),
			Security:    tooldef.Security{Level: tooldef.LevelSafe},
			Runner:      tooldef.Runner{Kind: tooldef.RunnerHTTP, Method: "GET", URL: "https://tools.invalid/x"},
		}
		if _, err := reg.Register(ctx, def, nil); err != nil {
			b.Fatal(err)
		}
	}
	s := New(Deps{Store: store, Authz: authz, Embedder: emb, Host: allHost(), Log: quiet})
	if err := s.Refresh(ctx); err != nil {
		b.Fatal(err)
	}
	queries := []string{
		"summarise the invoices from last quarter", "what is the weather in Lisbon tomorrow",
		"schedule a meeting on my calendar", "translate this email into French",
		"compare flight prices to Tokyo", "monitor the temperature sensor", "archive old tickets",
	}
	return s, queries
}

// BenchmarkSelect10k measures one selection (query embedding, ranking of
// 10,000 tools, rendering lookup and the selection record) and reports its
// p50 and p99, and the index memory per tool.
func BenchmarkSelect10k(b *testing.B) {
	// The word table is read once a process, not per tool: read it
	// before the index is measured.
	embed.NewBuiltin()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, queries := benchCatalog(b, 10_000)
	ctx := context.Background()
	var lat []time.Duration
	b.ResetTimer()
	i := 0
	for b.Loop() {
		start := time.Now()
		if _, err := s.Select(ctx, nil, SelectRequest{Query: queries[i%len(queries)], SessionID: "bench"}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		i++
	}
	b.StopTimer()
	sort.Slice(lat, func(a, c int) bool { return lat[a] < lat[c] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	ix := s.catalog.snapshot.Load()
	vecBytes := 0
	if len(ix.entries) > 0 {
		// The int8 codes and their scale, kept by the tool's version and
		// copied into the index's array, the binary code and its flag.
		vecBytes = 2*(len(ix.entries[0].doc.vec.codes)+4) + 8*ix.vecs.words + 1
	}
	perTool := (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(len(ix.entries))
	b.ReportMetric(perTool, "heap-B/tool")
	b.ReportMetric(perTool-float64(vecBytes), "non-vector-B/tool")
	runtime.KeepAlive(s)
}

// BenchmarkRegisterIndexed registers tools into a server-like setup whose
// selection index follows the catalog: a burst of registrations must not
// rebuild the index once per tool. It ends with one selection, which sees
// every tool.
func BenchmarkRegisterIndexed(b *testing.B) {
	ctx := context.Background()
	store, _ := modelstest.Store(&testing.T{})
	b.Cleanup(func() { _ = store.Close() })
	authz, _ := access.OpenAuthz(ctx, access.AuthzDeps{Store: store})
	reg := catalog.NewRegistry(store, quiet)
	s := New(Deps{Store: store, Authz: authz, Embedder: embed.NewBuiltin(), Host: allHost(), Log: quiet})
	running(b, s.Run)
	reg.OnChange(func(context.Context) { s.MarkDirty() })
	i := 0
	for b.Loop() {
		def := testTool(fmt.Sprintf("tool_%06d", i), fmt.Sprintf("Handle request kind %d and report.", i))
		if _, err := reg.Register(ctx, def, nil); err != nil {
			b.Fatal(err)
		}
		i++
	}
	res, err := s.Select(ctx, nil, SelectRequest{Query: "handle request kind", Limit: 1})
	if err != nil || len(res.Tools) != 1 || len(s.catalog.snapshot.Load().entries) != i {
		b.Fatalf("index holds %d of %d tools (%v)", len(s.catalog.snapshot.Load().entries), i, err)
	}
}
