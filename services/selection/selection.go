// Package selection is the select stage: it keeps an in-memory index of
// the active catalog (embedding vectors, BM25 postings, learned queries)
// and answers which 10 to 15 tools fit a task, within the caller's grants
// and what the host can run; it records each selection and learns from
// feedback. The retrieval benchmark measures it on labelled queries.
package selection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"toolbelt/internal/ttlcache"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/embed"
	"toolbelt/services/ops"
)

// Selection bounds.
const (
	DefaultSelectLimit = 12
	// DefaultMinScore is the score below which a tool is not offered
	// unless the request sets min_score: evidence this faint is a shared
	// common word or a sub-word likeness (docs/selection.md).
	DefaultMinScore = 0.05
	// GoodMatchScore is the best score under which a selection says no
	// tool fits well (no_good_match).
	GoodMatchScore = 0.3
	MaxSelectLimit = 40
	// DefaultKeepLearned caps the learned queries per tool; the oldest go.
	DefaultKeepLearned = 500
	// inlineEmbedLimit is how many missing vectors a refresh asks a remote
	// embedder for before answering; more (a model change) are embedded in
	// the background. The built-in embedder is fast enough to run inline.
	inlineEmbedLimit = 64
)

// Selector is the select stage: it keeps an in-memory index of the active
// catalog (vectors, lexical postings, learned queries) and answers which
// tools fit a task. Its state is grouped by concern: the index of the
// catalog, what it learned, the embedding of queries and of the catalog,
// and the goroutines it owns.
type Selector struct {
	store *models.Store
	authz *access.Authz
	emb   embed.Embedder
	tok   *embed.Tokenizer // the terms of tool texts, learned queries and queries
	host  ops.HostCaps
	// metrics receives selection latency.
	metrics  *ops.Metrics
	log      *slog.Logger
	recorder *selectionRecorder

	cfg        config
	catalog    catalogIndex
	learning   learningState
	queryEmbed queryEmbedding
	reembed    reembedProgress
	jobs       jobGroup
}

// config is what the selector settles at construction.
type config struct {
	// local: emb is the built-in embedder (fast, lexical), whatever wraps it.
	local bool
	// dims says the model's vector dimension (0 before it is known), so
	// stored vectors of another dimension are embedded again.
	dims interface{ Dim() int }
	keep int // learned queries kept per tool
	tune tuning
}

// jobGroup is the selector's own goroutines while Run runs (the learning
// worker, the pruning of old records, a background re-embed, a deferred
// refresh, a sync of learned queries): each ends with ctx, Run's, and Run
// waits for them, so none outlives it. running (under mu) says whether
// Run runs; goJob refuses while it does not.
type jobGroup struct {
	mu      sync.Mutex
	running bool
	ctx     context.Context
	wg      sync.WaitGroup
}

// Deps is what a selector needs.
type Deps struct {
	Store *models.Store
	// Authz hides the tools a caller may not call (nil: none hidden).
	Authz    *access.Authz
	Embedder embed.Embedder
	// Host is what this host can run: tools it cannot are hidden.
	Host ops.HostCaps
	// KeepLearned caps the learned queries per tool (0:
	// DefaultKeepLearned).
	KeepLearned int
	// Metrics receive the selection and embedding latency (nil: none).
	Metrics *ops.Metrics
	// OnLearned, when set, is called with the tools whose learned queries
	// this instance changed (learned or forgot), so the other instances
	// can sync them (SyncLearned).
	OnLearned func(ctx context.Context, tools []string)
	Log       *slog.Logger
}

// New returns a selector over d.Store using d.Embedder. It starts
// nothing: Run runs its background work. A selector that never runs (a
// tool, a test) does that work in its callers: it writes each selection
// record and learns from each call when asked, and re-embeds the catalog
// in WaitEmbedded.
func New(d Deps) *Selector {
	keep := d.KeepLearned
	if keep <= 0 {
		keep = DefaultKeepLearned
	}
	emb := d.Embedder
	if d.Metrics != nil {
		emb = timedEmbedder{Embedder: emb, m: d.Metrics}
	}
	s := &Selector{store: d.Store, authz: d.Authz, emb: emb, tok: embed.NewTokenizer(), host: d.Host, log: d.Log, metrics: d.Metrics,
		recorder: newSelectionRecorder(d.Store, d.Log),
		cfg:      config{keep: keep, tune: defaultTuning()},
		catalog:  catalogIndex{docs: map[uint]*docInfo{}},
		learning: learningState{lessons: make(chan callSeen, 1024),
			observations: ttlcache.New[string, observation](10_000, observationTTL)},
		queryEmbed: queryEmbedding{cache: embed.NewQueryCache(0)}}
	s.learning.onLearned = d.OnLearned
	_, s.cfg.local = d.Embedder.(*embed.Builtin)
	s.cfg.dims, _ = d.Embedder.(interface{ Dim() int })
	s.catalog.snapshot.Store(&index{byName: map[string]int{}, lex: newBM25(nil, bm25Params{})})
	s.learning.queries.Store(newLearnedIndex(emb.Model(), s.tok, nil))
	return s
}

// Run does the selector's background work until ctx ends: it writes the
// selection records in batches, learns from the calls observed, prunes
// the records past their retention (now and hourly), and runs the
// re-embeds and deferred refreshes asked of it. When ctx ends it writes
// the records queued, learns the lessons queued, and waits for its
// goroutines; from then on its callers do that work, as before it ran.
func (s *Selector) Run(ctx context.Context) error {
	s.jobs.mu.Lock()
	if s.jobs.running {
		s.jobs.mu.Unlock()
		return errors.New("the selector runs already")
	}
	s.jobs.running, s.jobs.ctx = true, ctx
	s.jobs.mu.Unlock()
	s.goJob(s.learnLessons)
	s.goJob(s.pruneRecords)
	if s.reembed.pending.Swap(false) {
		s.goJob(s.backgroundEmbed)
	}
	err := s.recorder.batch.Run(ctx)
	s.jobs.mu.Lock()
	s.jobs.running = false // no lesson is queued from now on
	s.jobs.mu.Unlock()
	s.jobs.wg.Wait()
	s.learnQueued()
	return err
}

// goJob runs f on a goroutine Run waits for, with Run's context; false
// when Run does not run.
func (s *Selector) goJob(f func(ctx context.Context)) bool {
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	if !s.jobs.running {
		return false
	}
	ctx := s.jobs.ctx
	s.jobs.wg.Add(1)
	go func() {
		defer s.jobs.wg.Done()
		f(ctx)
	}()
	return true
}

// running reports whether Run runs.
func (s *Selector) running() bool {
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	return s.jobs.running
}

// Host returns what this host can run.
func (s *Selector) Host() ops.HostCaps { return s.host }

// EmbedModel names the embedder's model the index is built with.
func (s *Selector) EmbedModel() string { return s.emb.Model() }

// Status describes the embedder and any background re-embedding, for
// /readyz and the logs.
func (s *Selector) Status() string {
	st := fmt.Sprintf("%s, %d tools indexed", s.emb.Model(), len(s.catalog.snapshot.Load().entries))
	if s.reembed.running.Load() {
		st += fmt.Sprintf(", re-embedding %d/%d", s.reembed.done.Load(), s.reembed.total.Load())
	}
	if s.EmbedFailing() {
		msg, _ := s.queryEmbed.lastErr.Load().(string)
		st += "; query embedding failing, ranking lexically: " + msg
	}
	return st
}
