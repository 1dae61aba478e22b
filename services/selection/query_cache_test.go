package selection

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"toolbelt/services/embed"
)

// TestQueryCache embeds a repeated task once: the selection, the learning
// from its feedback and later selections of the same text reuse the
// vector; another text asks the model again.
func TestQueryCache(t *testing.T) {
	ctx := context.Background()
	store, authz := catalogFixture(t, 0)
	c := newCounting("test/cached")
	s := newFixtureSelector(t, store, authz, c, 0)
	before := c.texts.Load()
	res, err := s.Select(ctx, nil, SelectRequest{Query: "read the contents of a text file", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Committed(ctx, res); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Feedback(ctx, nil, res.SelectionID, []string{"file_read"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.Select(ctx, nil, SelectRequest{Query: "read the contents of a text file", Limit: 3}); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.texts.Load() - before; n != 1 {
		t.Errorf("the model embedded %d texts for one repeated task, want 1", n)
	}
	if _, err := s.Select(ctx, nil, SelectRequest{Query: "list the files of a folder", Limit: 3}); err != nil {
		t.Fatal(err)
	}
	if n := c.texts.Load() - before; n != 2 {
		t.Errorf("after a second task the model embedded %d texts, want 2", n)
	}
}

// TestQueryCacheKeys keeps the same text under two models apart.
func TestQueryCacheKeys(t *testing.T) {
	q := embed.NewQueryCache(2)
	q.Add("a", "text", []float32{1})
	q.Add("b", "text", []float32{2})
	if v, ok := q.Get("a", "text"); !ok || v[0] != 1 {
		t.Errorf("model a: %v %v", v, ok)
	}
	if v, ok := q.Get("b", "text"); !ok || v[0] != 2 {
		t.Errorf("model b: %v %v", v, ok)
	}
	q.Add("c", "text", []float32{3})
	if q.Len() != 2 {
		t.Errorf("a cache of 2 holds %d", q.Len())
	}
}

// flakyEmbedder fails every query while down is set.
type flakyEmbedder struct {
	countingEmbedder
	down atomic.Bool
}

func (f *flakyEmbedder) Embed(ctx context.Context, kind embed.Kind, texts []string) ([][]float32, error) {
	if kind == embed.Query && f.down.Load() {
		return nil, fmt.Errorf("ollama embed: ollama unreachable at http://127.0.0.1:1")
	}
	return f.countingEmbedder.Embed(ctx, kind, texts)
}

// TestQueryEmbeddingComesBack says the embedder fails until it answers
// again (not only while backing off), and ranks densely once it does.
func TestQueryEmbeddingComesBack(t *testing.T) {
	ctx := context.Background()
	store, authz := catalogFixture(t, 0)
	f := &flakyEmbedder{countingEmbedder: countingEmbedder{model: "test/flaky", inner: embed.NewBuiltin()}}
	s := newFixtureSelector(t, store, authz, f, 0)
	f.down.Store(true)
	if _, err := s.Select(ctx, nil, SelectRequest{Query: "read a text file", Limit: 1}); err != nil {
		t.Fatal(err)
	}
	s.queryEmbed.failUntil.Store(time.Now().Add(-time.Second).UnixNano()) // the pause is over
	if !s.EmbedFailing() {
		t.Error("EmbedFailing is false before the embedder answered again")
	}
	f.down.Store(false)
	res, err := s.Select(ctx, nil, SelectRequest{Query: "write a text file", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if s.EmbedFailing() || res.Tools[0].Reasons.DenseSimilarity <= 0 {
		t.Errorf("after the embedder came back: failing %v, dense %v", s.EmbedFailing(), res.Tools[0].Reasons.DenseSimilarity)
	}
}

// modelDim is the dimension of the stand-in model of BenchmarkSelectOverhead10k,
// USE-lite's.
const modelDim = 512

// randomModel stands in for a remote embedding model: a pseudo-random
// unit vector per text, of modelDim dimensions. It is not the built-in
// embedder, so the selector weighs it as a model and embeds a large
// catalog in the background.
type randomModel struct{ calls atomic.Int64 }

func (*randomModel) Model() string { return "test/random-512" }

func (r *randomModel) Embed(_ context.Context, _ embed.Kind, texts []string) ([][]float32, error) {
	r.calls.Add(1)
	out := make([][]float32, len(texts))
	for i, t := range texts {
		h := fnv.New64a()
		h.Write([]byte(t))
		rng := rand.New(rand.NewPCG(h.Sum64(), 1))
		v := make([]float32, modelDim)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		out[i] = embed.Normalize(v)
	}
	return out, nil
}

// BenchmarkSelectOverhead10k measures what a selection costs beyond the
// embedder's own call, at 10,000 tools with 512-dimension vectors: the
// queries are embedded once before the timer starts, so each selection
// takes its vector from the query cache and pays only ranking, renderings
// and the selection record. Target: p50 under 1 ms.
func BenchmarkSelectOverhead10k(b *testing.B) {
	s, queries := benchCatalogWith(b, 10_000, &randomModel{})
	ctx := context.Background()
	if err := s.WaitEmbedded(ctx); err != nil { // the catalog is embedded in the background
		b.Fatal(err)
	}
	for _, q := range queries {
		if _, err := s.Select(ctx, nil, SelectRequest{Query: q, SessionID: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	var lat []time.Duration
	i := 0
	b.ResetTimer()
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
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
