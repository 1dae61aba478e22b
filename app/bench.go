package app

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/catalog"
	"toolbelt/services/embed"
	"toolbelt/services/ops"
	"toolbelt/services/selection"
)

// BenchConfig is the setting of the retrieval benchmark ("toolbelt bench
// retrieval").
type BenchConfig struct {
	Tools, Queries, History string
	JSON                    bool
	OllamaURL, EmbedModel   string
}

// ParseBenchConfig reads the retrieval benchmark's flags (args after
// "retrieval") and the embedder's variables, which lookup reads.
func ParseBenchConfig(args []string, lookup func(string) (string, bool)) (BenchConfig, error) {
	env := func(name, def string) string {
		if v, ok := lookup(name); ok && v != "" {
			return v
		}
		return def
	}
	var cfg BenchConfig
	fs := flag.NewFlagSet("bench retrieval", flag.ContinueOnError)
	fs.StringVar(&cfg.Tools, "tools", "", "JSON lines of {name, description, category?, parameters?}")
	fs.StringVar(&cfg.Queries, "queries", "", "JSON lines of {query, gold: [names]} to measure")
	fs.StringVar(&cfg.History, "history", "", "JSON lines of {query, gold} replayed as past usage first")
	fs.BoolVar(&cfg.JSON, "json", false, "print one JSON object")
	fs.StringVar(&cfg.OllamaURL, "ollama-url", env("TOOLBELT_OLLAMA_URL", ""), "Ollama base URL (TOOLBELT_OLLAMA_URL); the built-in embedder when empty")
	fs.StringVar(&cfg.EmbedModel, "embed-model", env("TOOLBELT_EMBED_MODEL", "nomic-embed-text"), "Ollama embedding model (TOOLBELT_EMBED_MODEL)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if cfg.Tools == "" || cfg.Queries == "" {
		return cfg, fmt.Errorf("bench retrieval needs --tools and --queries")
	}
	return cfg, nil
}

// Bench runs the retrieval benchmark on the server's own registry and
// selector, with the embedder New would choose, over a temporary database,
// and prints the report to w.
func Bench(ctx context.Context, cfg BenchConfig, w io.Writer) error {
	emb, note, err := chooseEmbedder(ctx, cfg.OllamaURL, cfg.EmbedModel)
	if err != nil {
		return err
	}
	store, authz, done, err := benchStore(ctx)
	if err != nil {
		return err
	}
	defer done()
	log := slog.New(slog.DiscardHandler)
	sel := selection.New(selection.Deps{Store: store, Authz: authz, Embedder: emb, Host: ops.HostCaps{Chromium: true, Python: true, Node: true, Sandbox: true}, Log: log})
	rep, err := runRetrievalBench(ctx, BenchOptions{Tools: cfg.Tools, Queries: cfg.Queries, History: cfg.History,
		Registry: catalog.NewRegistry(store, log), Selector: sel})
	if err != nil {
		return err
	}
	if cfg.JSON {
		return json.NewEncoder(w).Encode(rep)
	}
	if note != "" {
		fmt.Fprintln(w, note)
	}
	fmt.Fprintf(w, "embedder   %s\ntools      %d registered", rep.Embedder, rep.Tools)
	if len(rep.Unregister) > 0 {
		fmt.Fprintf(w, ", %d refused:\n  %s", len(rep.Unregister), strings.Join(rep.Unregister, "\n  "))
	}
	fmt.Fprintf(w, "\nembedding  %.2f s (the tools, before any query)\nreplayed   %d history queries\nqueries    %d",
		rep.EmbedSeconds, rep.Replayed, rep.Queries)
	if rep.Lexical > 0 {
		fmt.Fprintf(w, ", %d ranked lexically (the model's embedding failed or was backing off: rerun on a quieter machine)", rep.Lexical)
	}
	if rep.Failed > 0 {
		fmt.Fprintf(w, ", %d failed (counted as misses; the first: %s)", rep.Failed, rep.FailedExample)
	}
	fmt.Fprintf(w, "\nRecall@5   %.2f\nRecall@10  %.2f\nRecall@15  %.2f\nNDCG@10    %.2f\nall@10     %.2f (queries with every gold tool in the top 10)\nlatency    p50 %.3f ms, p99 %.3f ms\n",
		rep.Recall5, rep.Recall10, rep.Recall15, rep.NDCG10, rep.Complete10, rep.P50Ms, rep.P99Ms)
	for _, name := range slices.Sorted(maps.Keys(rep.Subsets)) {
		s := rep.Subsets[name]
		fmt.Fprintf(w, "subset %s: %d queries, Recall@5 %.2f, @10 %.2f, @15 %.2f, NDCG@10 %.2f, all@10 %.2f\n",
			name, s.Queries, s.Recall5, s.Recall10, s.Recall15, s.NDCG10, s.Complete10)
	}
	return nil
}

// SelectBenchConfig is the setting of the selection benchmark ("toolbelt
// bench select").
type SelectBenchConfig struct {
	Tools, Queries int
	JSON           bool
}

// ParseSelectBenchConfig reads the selection benchmark's flags (args after
// "select").
func ParseSelectBenchConfig(args []string) (SelectBenchConfig, error) {
	var cfg SelectBenchConfig
	fs := flag.NewFlagSet("bench select", flag.ContinueOnError)
	fs.IntVar(&cfg.Tools, "tools", 10_000, "synthetic tools to register")
	fs.IntVar(&cfg.Queries, "queries", 3_000, "selections to time")
	fs.BoolVar(&cfg.JSON, "json", false, "print one JSON object")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if cfg.Tools < 1 || cfg.Queries < 1 {
		return cfg, fmt.Errorf("bench select needs --tools and --queries of at least 1")
	}
	return cfg, nil
}

// SelectBenchReport is what a selection benchmark run measured.
type SelectBenchReport struct {
	Tools    int     `json:"tools"`
	Queries  int     `json:"queries"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	ImportS  float64 `json:"import_s"`
	BuildS   float64 `json:"build_s"`
	IndexB   float64 `json:"index_bytes_per_tool"`
	Embedder string  `json:"embedder"`
}

// BenchSelect registers a synthetic catalog of cfg.Tools tools through the
// registry's bulk import (the OpenAPI import's path) into a temporary
// database, builds the selector's index with the built-in embedder, and
// times cfg.Queries selections; it prints latency, the index's build time
// and its heap per tool.
func BenchSelect(ctx context.Context, cfg SelectBenchConfig, w io.Writer) error {
	store, authz, done, err := benchStore(ctx)
	if err != nil {
		return err
	}
	defer done()
	log := slog.New(slog.DiscardHandler)
	reg := catalog.NewRegistry(store, log)
	defs := selection.SyntheticTools(cfg.Tools, 1)
	start := time.Now()
	for lo := 0; lo < len(defs); lo += 5000 {
		if _, _, err := reg.ImportAll(ctx, defs[lo:min(lo+5000, len(defs))], nil, nil); err != nil {
			return err
		}
	}
	rep := SelectBenchReport{Tools: cfg.Tools, Queries: cfg.Queries, ImportS: time.Since(start).Seconds()}
	emb := embed.NewBuiltin()
	sel := selection.New(selection.Deps{Store: store, Authz: authz, Embedder: emb, Host: ops.HostCaps{Chromium: true, Python: true, Node: true, Sandbox: true}, Log: log})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start = time.Now()
	if err := sel.Refresh(ctx); err != nil {
		return err
	}
	rep.BuildS = time.Since(start).Seconds()
	runtime.GC()
	runtime.ReadMemStats(&after)
	rep.IndexB = math.Round((float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(cfg.Tools))
	rep.Embedder = emb.Model()
	queries := selection.SyntheticQueries(cfg.Queries, 2)
	lat := make([]time.Duration, 0, len(queries))
	for i, q := range append(queries[:min(50, len(queries)):min(50, len(queries))], queries...) {
		t := time.Now()
		if _, err := sel.Select(ctx, nil, selection.SelectRequest{Query: q, SessionID: "bench"}); err != nil {
			return err
		}
		if i >= min(50, len(queries)) { // the first 50 warm up
			lat = append(lat, time.Since(t))
		}
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }
	rep.P50Ms, rep.P99Ms = ms(lat[len(lat)/2]), ms(lat[min(len(lat)-1, len(lat)*99/100)])
	runtime.KeepAlive(sel)
	if cfg.JSON {
		return json.NewEncoder(w).Encode(rep)
	}
	fmt.Fprintf(w, "embedder   %s\ntools      %d (imported in %.1f s)\nindex      built in %.2f s, %.0f bytes a tool\nqueries    %d\nlatency    p50 %.3f ms, p99 %.3f ms\n",
		rep.Embedder, rep.Tools, rep.ImportS, rep.BuildS, rep.IndexB, rep.Queries, rep.P50Ms, rep.P99Ms)
	return nil
}

// benchStore opens a store in a new temporary directory, and the access
// rules over it; done closes the store and removes the directory.
func benchStore(ctx context.Context) (store *models.Store, authz *access.Authz, done func(), err error) {
	dir, err := os.MkdirTemp("", "toolbelt-bench-")
	if err != nil {
		return nil, nil, nil, err
	}
	if store, err = models.Open(ctx, filepath.Join(dir, "bench.db")); err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	done = func() {
		_ = store.Close()
		os.RemoveAll(dir)
	}
	if authz, err = access.OpenAuthz(ctx, access.AuthzDeps{Store: store}); err != nil {
		done()
		return nil, nil, nil, err
	}
	return store, authz, done, nil
}
