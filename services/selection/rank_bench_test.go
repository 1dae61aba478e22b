package selection

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/embed"
)

// memSelector is a selector whose index holds the synthetic catalog of n
// tools, built by the selector's own build from documents made in memory
// (no store: registering 100,000 tools would dominate the benchmark).
func memSelector(tb testing.TB, n int) *Selector {
	tb.Helper()
	ctx := context.Background()
	store, _ := modelstest.Store(&testing.T{})
	tb.Cleanup(func() { _ = store.Close() })
	s := New(Deps{Store: store, Embedder: embed.NewBuiltin(), Host: allHost(), Log: quiet})
	running(tb, s.Run)
	defs := SyntheticTools(n, 1)
	tools := make([]models.ActiveTool, n)
	texts := make([]string, n)
	for i := range defs {
		texts[i], _ = retrievalTexts(&defs[i])
	}
	vecs, err := s.emb.Embed(ctx, embed.Document, texts)
	if err != nil {
		tb.Fatal(err)
	}
	for i, def := range defs {
		id := uint(i + 1)
		d := &docInfo{text: texts[i], needs: needsOf(&def), vec: quantise(vecs[i])}
		d.terms = append(s.tok.Terms(texts[i]), s.tok.Terms(strings.Join(embed.Words(def.Name), " "))...)
		s.catalog.docs[id] = d
		tools[i] = models.ActiveTool{Name: def.Name, Category: def.Category, Level: def.Security.Level, VersionID: id}
	}
	sort.Slice(tools, func(a, b int) bool { return tools[a].Name < tools[b].Name })
	s.catalog.snapshot.Store(s.build(tools))
	return s
}

// BenchmarkRank measures rank alone (query embedding, the four signals,
// fusion, top-k and reasons) over synthetic catalogs, reporting p50/p99.
func BenchmarkRank(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := memSelector(b, n)
			ix := s.catalog.snapshot.Load()
			queries := SyntheticQueries(512, 2)
			all := scope{vis: visibility{all: true}}
			ctx := context.Background()
			var lat []time.Duration
			i := 0
			for b.Loop() {
				start := time.Now()
				s.rank(ctx, ix, task{focus: queries[i%len(queries)]}, all, DefaultSelectLimit)
				lat = append(lat, time.Since(start))
				i++
			}
			sort.Slice(lat, func(a, c int) bool { return lat[a] < lat[c] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
			runtime.KeepAlive(s)
		})
	}
}

// recallVsExact is the share of the exact ranking's top limit tools that
// the approximate dense pass also returns, over queries.
func recallVsExact(s *Selector, queries []string, limit int) float64 {
	ctx := context.Background()
	ix := s.catalog.snapshot.Load()
	exact := *ix
	exact.keep = 0
	all := scope{vis: visibility{all: true}}
	found, total := 0, 0
	for _, q := range queries {
		want := map[int]bool{}
		for _, r := range s.rank(ctx, &exact, task{focus: q}, all, limit) {
			want[r.entry] = true
		}
		for _, r := range s.rank(ctx, ix, task{focus: q}, all, limit) {
			if want[r.entry] {
				found++
			}
		}
		total += len(want)
	}
	return float64(found) / float64(max(total, 1))
}

// BenchmarkRankRecall reports how much of the exact scan's selection the
// approximate dense pass keeps, at 10,000 and 100,000 tools.
func BenchmarkRankRecall(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := memSelector(b, n)
			queries := SyntheticQueries(400, 3)
			var r float64
			for b.Loop() {
				r = recallVsExact(s, queries, 15)
			}
			b.ReportMetric(100*r, "recall@15-%")
		})
	}
}
