package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"toolbelt/services/catalog"
	"toolbelt/services/selection"
	"toolbelt/services/tooldef"
)

// BenchTool is one record of a benchmark tool file.
type BenchTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Category    string          `json:"category,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// BenchQuery is one labelled query: the task, as a query or as the
// conversation an agent sends (messages in the chat format, a system
// prompt and the user's request, say), the tools that answer it, and the
// part of the set it belongs to, if the set has parts.
type BenchQuery struct {
	Query    string              `json:"query,omitempty"`
	Messages []selection.Message `json:"messages,omitempty"`
	Gold     []string            `json:"gold"`
	Subset   string              `json:"subset,omitempty"`
}

// request is the selection request the query makes.
func (q BenchQuery) request(limit int) selection.SelectRequest {
	return selection.SelectRequest{Query: q.Query, Messages: q.Messages, Limit: limit}
}

// text is the query's text for a report: the query, or the last message.
func (q BenchQuery) text() string {
	if q.Query == "" && len(q.Messages) > 0 {
		var s string
		_ = json.Unmarshal(q.Messages[len(q.Messages)-1].Content, &s)
		return s
	}
	return q.Query
}

// BenchOptions configures a retrieval benchmark run.
type BenchOptions struct {
	Tools   string // JSON lines of BenchTool
	Queries string // JSON lines of BenchQuery, measured
	History string // optional JSON lines of BenchQuery, replayed as past usage first
	// Registry and Selector are the server's own, over an empty store
	// (the app assembles them).
	Registry *catalog.Registry
	Selector *selection.Selector
}

// BenchScores are what a run measured on a set of queries: recall at 5, 10
// and 15, NDCG at 10, and the share of queries whose gold tools are all
// in the top 10 (a task needing three tools is not done with two of
// them, which recall counts as two thirds), as percentages.
type BenchScores struct {
	Recall5    float64 `json:"recall@5"`
	Recall10   float64 `json:"recall@10"`
	Recall15   float64 `json:"recall@15"`
	NDCG10     float64 `json:"ndcg@10"`
	Complete10 float64 `json:"complete@10"`
	Queries    int     `json:"queries"`
}

// add counts one query whose selection named got (nil when it failed).
func (s *BenchScores) add(got, gold []string) {
	s.Recall5 += recallAt(got, gold, 5)
	s.Recall10 += recallAt(got, gold, 10)
	s.Recall15 += recallAt(got, gold, 15)
	s.NDCG10 += ndcgAt(got, gold, 10)
	if len(gold) > 0 && recallAt(got, gold, 10) == 1 {
		s.Complete10++
	}
	s.Queries++
}

// finish turns the sums into percentages.
func (s *BenchScores) finish() {
	if s.Queries == 0 {
		return
	}
	n := float64(s.Queries)
	s.Recall5 = round(100*s.Recall5/n, 2)
	s.Recall10 = round(100*s.Recall10/n, 2)
	s.Recall15 = round(100*s.Recall15/n, 2)
	s.NDCG10 = round(100*s.NDCG10/n, 2)
	s.Complete10 = round(100*s.Complete10/n, 2)
}

// BenchReport is what a run measured.
type BenchReport struct {
	BenchScores          // of every measured query
	P50Ms       float64  `json:"p50_ms"`
	P99Ms       float64  `json:"p99_ms"`
	Tools       int      `json:"tools"`
	Replayed    int      `json:"replayed,omitempty"`
	Embedder    string   `json:"embedder"`
	Unregister  []string `json:"unregistered,omitempty"`
	// EmbedSeconds is how long the tools took to embed, from the first
	// refresh until every tool had its vector; measured queries start after.
	EmbedSeconds float64 `json:"embed_seconds"`
	// Failed counts measured queries whose selection failed; each counts
	// as a miss, and FailedExample says why the first one did.
	Failed        int    `json:"failed,omitempty"`
	FailedExample string `json:"failed_example,omitempty"`
	// Lexical counts measured queries a remote model's embedding failed
	// for (it timed out on a loaded machine, or the selector was backing
	// off after a failure): they ranked lexically, as a server would, so
	// when it is not 0 the figures are partly BM25's, not the model's.
	Lexical int `json:"lexical_fallbacks,omitempty"`
	// Subsets holds the scores of each subset the queries name (a set's
	// categories, which one figure over all would average away).
	Subsets map[string]*BenchScores `json:"subsets,omitempty"`
}

// runRetrievalBench registers the tools through the registry, optionally
// replays history as selections followed by feedback (what an agent's
// calls teach), then measures the selection of every query: recall at 5,
// 10 and 15, NDCG at 10 and latency.
func runRetrievalBench(ctx context.Context, opts BenchOptions) (*BenchReport, error) {
	tools, err := readJSONLines[BenchTool](opts.Tools)
	if err != nil {
		return nil, err
	}
	queries, err := readJSONLines[BenchQuery](opts.Queries)
	if err != nil {
		return nil, err
	}
	var history []BenchQuery
	if opts.History != "" {
		if history, err = readJSONLines[BenchQuery](opts.History); err != nil {
			return nil, err
		}
	}
	reg, sel := opts.Registry, opts.Selector
	rep := &BenchReport{Embedder: sel.EmbedModel()}
	for _, t := range tools {
		if _, err := reg.Register(ctx, benchDefinition(t), nil); err != nil {
			rep.Unregister = append(rep.Unregister, fmt.Sprintf("%s: %v", t.Name, err))
			continue
		}
		rep.Tools++
	}
	embedStart := time.Now()
	if err := sel.Refresh(ctx); err != nil {
		return nil, err
	}
	// A remote model embeds a large catalog in the background while
	// selection ranks lexically; measuring then would measure BM25.
	if err := sel.WaitEmbedded(ctx); err != nil {
		return nil, err
	}
	rep.EmbedSeconds = round(time.Since(embedStart).Seconds(), 2)
	for i, q := range history {
		req := q.request(1)
		req.SessionID = fmt.Sprintf("history-%d", i)
		res, err := sel.Select(ctx, nil, req)
		if err != nil {
			continue // not replayed; the run goes on
		}
		if _, err := sel.Feedback(ctx, nil, res.SelectionID, q.Gold); err != nil {
			continue // gold names a tool that did not register
		}
		rep.Replayed++
	}
	var lat []float64
	for _, q := range queries {
		start := time.Now()
		res, err := sel.Select(ctx, nil, q.request(15))
		lat = append(lat, float64(time.Since(start).Microseconds())/1000)
		if sel.EmbedFailing() {
			rep.Lexical++
		}
		var names []string // none when the selection failed: a miss, not the end of the run
		if err != nil {
			if rep.Failed == 0 {
				rep.FailedExample = fmt.Sprintf("select %q: %v", q.text(), err)
			}
			rep.Failed++
		} else {
			for _, t := range res.Tools {
				names = append(names, t.Name)
			}
		}
		rep.add(names, q.Gold)
		if q.Subset != "" {
			if rep.Subsets == nil {
				rep.Subsets = map[string]*BenchScores{}
			}
			if rep.Subsets[q.Subset] == nil {
				rep.Subsets[q.Subset] = &BenchScores{}
			}
			rep.Subsets[q.Subset].add(names, q.Gold)
		}
	}
	for _, s := range rep.Subsets {
		s.finish()
	}
	if rep.Queries > 0 {
		rep.finish()
		sort.Float64s(lat)
		rep.P50Ms = round(percentile(lat, 0.50), 3)
		rep.P99Ms = round(percentile(lat, 0.99), 3)
	}
	return rep, nil
}

// benchDefinition makes a registrable definition of a benchmark record: a
// safe tool of its category (api when missing) with an http runner, since
// only retrieval is measured.
func benchDefinition(t BenchTool) tooldef.Definition {
	cat := t.Category
	if cat == "" {
		cat = "api"
	}
	return tooldef.Definition{
		Name: t.Name, Version: "1.0.0", Description: t.Description, Category: cat, Parameters: t.Parameters,
		Security: tooldef.Security{Level: tooldef.LevelSafe},
		Runner:   tooldef.Runner{Kind: tooldef.RunnerHTTP, Method: "GET", URL: "https://tools.invalid/" + t.Name},
	}
}

func readJSONLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

func recallAt(got, gold []string, k int) float64 {
	if len(gold) == 0 {
		return 0
	}
	hits := 0
	for _, g := range gold {
		if slices.Contains(got[:min(k, len(got))], g) {
			hits++
		}
	}
	return float64(hits) / float64(len(gold))
}

func ndcgAt(got, gold []string, k int) float64 {
	var dcg, idcg float64
	for i := 0; i < min(k, len(got)); i++ {
		if slices.Contains(gold, got[i]) {
			dcg += 1 / math.Log2(float64(i+2))
		}
	}
	for i := 0; i < min(k, len(gold)); i++ {
		idcg += 1 / math.Log2(float64(i+2))
	}
	if idcg == 0 {
		return 0
	}
	return dcg / idcg
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// round rounds x to digits decimal places.
func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}
