package app

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/catalog"
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
	dir, err := os.MkdirTemp("", "toolbelt-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := models.Open(ctx, filepath.Join(dir, "bench.db"))
	if err != nil {
		return err
	}
	defer store.Close()
	log := slog.New(slog.DiscardHandler)
	authz, err := access.NewAuthz(ctx, store, nil)
	if err != nil {
		return err
	}
	sel := selection.NewSelector(store, authz, emb, ops.HostCaps{Chromium: true, Python: true, Node: true, Sandbox: true}, 0, log)
	defer sel.Close()
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
	if rep.Failed > 0 {
		fmt.Fprintf(w, ", %d failed (counted as misses; the first: %s)", rep.Failed, rep.FailedExample)
	}
	fmt.Fprintf(w, "\nRecall@5   %.2f\nRecall@10  %.2f\nRecall@15  %.2f\nNDCG@10    %.2f\nlatency    p50 %.3f ms, p99 %.3f ms\n",
		rep.Recall5, rep.Recall10, rep.Recall15, rep.NDCG10, rep.P50Ms, rep.P99Ms)
	return nil
}
