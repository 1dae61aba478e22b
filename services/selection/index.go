package selection

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"toolbelt/models"
	"toolbelt/services/embed"
	"toolbelt/services/ops"
	"toolbelt/services/tooldef"
)

// needs is what a tool version requires of the host.
type needs struct {
	chromium, interpreter, sandbox bool
}

func needsOf(def *tooldef.Definition) needs {
	n := needs{sandbox: def.Security.Sandbox}
	if def.Runner.Kind == tooldef.RunnerBuiltin {
		switch def.Runner.Builtin {
		case "browser_navigate":
			n.chromium = true
		case "code_execute":
			n.interpreter = true
		}
	}
	return n
}

// metBy reports whether host h has what a tool needs.
func (n needs) metBy(h ops.HostCaps) bool {
	return (!n.chromium || h.Chromium) && (!n.interpreter || h.Python || h.Node) && (!n.sandbox || h.Sandbox)
}

// catalogIndex is the selector's index of the active catalog: the
// snapshot rankings read, the per-version documents it is built from,
// and the state of its refreshes.
type catalogIndex struct {
	mu       sync.Mutex // serializes refreshes
	docs     map[uint]*docInfo
	snapshot atomic.Pointer[index]
	dirty    atomic.Bool // the catalog changed since the last refresh
	// refreshing is set while Refresh builds a new index.
	refreshing atomic.Bool
	timer      atomic.Bool // a deferred refresh is scheduled
}

// docInfo is what one tool version contributes to the index; it is
// computed once per version.
type docInfo struct {
	text  string
	hash  string
	terms []string
	needs needs
	vec   qvec // none (nil codes) until embedded
	sizes map[string]int
}

// entry is one active tool in an index snapshot.
type entry struct {
	name, category, level string
	versionID             uint
	doc                   *docInfo
	// runnable: this host can run it (its needs are met), settled at
	// build.
	runnable bool
}

// index is an immutable snapshot of the catalog for ranking.
type index struct {
	entries []*entry
	byName  map[string]int
	lex     *bm25
	// names is BM25 over the tools' names' character 4-grams.
	names *bm25
	// runnable and cat are, per entry, whether this host can run it and
	// its category's place in tooldef.Categories, so a ranking's scope
	// (rank.go) is settled without reading the entries.
	runnable []bool
	cat      []uint8
	// vecs holds every entry's codes for the dense ranking (dense.go);
	// keep is how many candidates its binary pass keeps (0: all, exact).
	vecs denseIndex
	keep int
	// opens counts, per stem, the tools whose name opens with it
	// ("get" of get_weather): a task's clause that opens with such a word
	// asks for something of its own (intents.go).
	opens map[string]int
	// tokens is, per category and format, the token estimate of the
	// entries this host can run, so a selection's catalog estimate costs
	// a sum per category instead of a pass over the catalog.
	tokens map[string]map[string]int
}

// acts reports whether a word opens the names of two tools or more (of
// more than one word each): an action of the catalog's.
func (ix *index) acts(tok *embed.Tokenizer) func(string) bool {
	return func(w string) bool { return ix.opens[tok.Stem(w)] >= 2 }
}

// catalogTokens is the token estimate in format of the entries the
// visibility allows and host can run.
func (ix *index) catalogTokens(vis visibility, host ops.HostCaps, format string) int {
	n := 0
	for c, by := range ix.tokens {
		if vis.all || vis.categories[c] {
			n += by[format]
		}
	}
	if vis.all {
		return n
	}
	for name := range vis.tools {
		if i, ok := ix.byName[name]; ok {
			if e := ix.entries[i]; !vis.categories[e.category] && vis.allows(e) && e.doc.needs.metBy(host) {
				n += e.doc.sizes[format] / 4
			}
		}
	}
	return n
}

// MarkDirty notes that the catalog changed. The index is rebuilt before
// the next selection needs it, or shortly after in the background; a burst
// of registrations costs one rebuild, not one each.
func (s *Selector) MarkDirty() {
	s.catalog.dirty.Store(true)
	if s.running() && s.catalog.timer.CompareAndSwap(false, true) {
		time.AfterFunc(100*time.Millisecond, func() {
			s.catalog.timer.Store(false)
			s.goJob(func(ctx context.Context) {
				if err := s.ensureFresh(ctx); err != nil && ctx.Err() == nil {
					s.log.Error("refresh the selection index", "err", err)
				}
			})
		})
	}
}

// ensureFresh rebuilds the index if the catalog changed since, or waits
// for the rebuild under way.
func (s *Selector) ensureFresh(ctx context.Context) error {
	if !s.catalog.dirty.Load() && !s.catalog.refreshing.Load() {
		return nil
	}
	// A refresh under way (the deferred one MarkDirty schedules) cleared
	// dirty when it started; it may hold a change this caller made before
	// asking, so wait for its index instead of answering from the old one.
	// Callers that saw dirty together rebuild once: the first one.
	s.catalog.mu.Lock()
	defer s.catalog.mu.Unlock()
	if s.catalog.dirty.Load() {
		return s.refreshLocked(ctx)
	}
	return nil
}

// dimOK reports whether a stored vector of n dimensions fits the model.
func (s *Selector) dimOK(n int) bool {
	if s.cfg.dims == nil {
		return true
	}
	d := s.cfg.dims.Dim()
	return d == 0 || n == d
}

// Refresh rebuilds the index from the store: new versions get their
// retrieval text and vector (stored, so a restart re-embeds nothing),
// learned queries are reloaded. It is called at start and after every
// catalog or learning change.
func (s *Selector) Refresh(ctx context.Context) error {
	s.catalog.mu.Lock()
	defer s.catalog.mu.Unlock()
	return s.refreshLocked(ctx)
}

// refreshLocked is Refresh with s.catalog.mu held.
func (s *Selector) refreshLocked(ctx context.Context) error {
	s.catalog.refreshing.Store(true)
	defer s.catalog.refreshing.Store(false)
	s.catalog.dirty.Store(false)
	tools, err := s.store.ActiveTools(ctx)
	if err != nil {
		return err
	}
	var missing []uint
	for _, t := range tools {
		if _, ok := s.catalog.docs[t.VersionID]; !ok {
			missing = append(missing, t.VersionID)
		}
	}
	if err := s.loadDocs(ctx, missing); err != nil {
		return err
	}
	var learned []models.LearnedQuery
	if !s.learning.loaded {
		if learned, err = s.store.LearnedQueries(ctx, ""); err != nil {
			return err
		}
	}
	job := s.missing(tools, learned)
	switch {
	case job.size() > inlineEmbedLimit && !s.cfg.local:
		// Without Run, the re-embed waits for it (or for WaitEmbedded);
		// it counts as running meanwhile.
		if s.reembed.running.CompareAndSwap(false, true) && !s.goJob(s.backgroundEmbed) {
			s.reembed.pending.Store(true)
		}
	case job.size() > 0:
		docs, queries, err := s.embedJobTexts(ctx, job)
		if err == nil {
			err = s.applyJob(ctx, job, docs, queries)
		}
		if err != nil {
			s.log.WarnContext(ctx, "embed tools; they rank lexically until the embedder answers", "err", err)
		} else if len(job.learned) > 0 {
			if learned, err = s.store.LearnedQueries(ctx, ""); err != nil {
				return err
			}
		}
	}
	if !s.learning.loaded {
		s.learning.queries.Store(newLearnedIndex(s.emb.Model(), s.tok, learned))
		s.learning.loaded = true
	}
	s.catalog.snapshot.Store(s.build(tools))
	return nil
}

// loadDocs reads definitions of versions new to the selector and their
// stored vectors under the current model.
func (s *Selector) loadDocs(ctx context.Context, ids []uint) error {
	if len(ids) == 0 {
		return nil
	}
	defs, err := s.store.VersionDefinitions(ctx, ids)
	if err != nil {
		return err
	}
	sizes, err := s.store.ExportSizes(ctx, ids)
	if err != nil {
		return err
	}
	stored, err := s.store.Embeddings(ctx, s.emb.Model(), ids)
	if err != nil {
		return err
	}
	vecs := map[uint]models.ToolEmbedding{}
	for _, e := range stored {
		vecs[e.VersionID] = e
	}
	for _, id := range ids {
		def, err := tooldef.Decode(defs[id])
		if err != nil {
			return fmt.Errorf("index version %d: %w", id, err)
		}
		text, vtext := retrievalTexts(&def)
		if s.cfg.local {
			vtext = text
		}
		sum := sha256.Sum256([]byte(vtext))
		d := &docInfo{text: vtext, hash: hex.EncodeToString(sum[:]), needs: needsOf(&def), sizes: sizes[id]}
		d.terms = s.tok.Terms(text)
		for range s.cfg.tune.nameRepeat {
			d.terms = append(d.terms, s.tok.Terms(strings.Join(embed.Words(def.Name), " "))...)
		}
		if e, ok := vecs[id]; ok && e.TextHash == d.hash && s.dimOK(len(e.Vector)/4) {
			d.vec = quantise(decodeVector(e.Vector))
		}
		s.catalog.docs[id] = d
	}
	return nil
}

// build makes an index snapshot of the catalog; s.catalog.mu is held.
func (s *Selector) build(tools []models.ActiveTool) *index {
	ix := &index{byName: make(map[string]int, len(tools)), keep: denseKeep(len(tools)), tokens: map[string]map[string]int{}, opens: map[string]int{}}
	docs := make([][]string, len(tools))
	vecs := make([]qvec, len(tools))
	dims := map[int]int{}
	live := make(map[uint]bool, len(tools))
	for i, t := range tools {
		d := s.catalog.docs[t.VersionID]
		ix.runnable = append(ix.runnable, d.needs.metBy(s.host))
		ix.cat = append(ix.cat, categoryID(t.Category))
		ix.entries = append(ix.entries, &entry{name: t.Name, category: t.Category, level: t.Level, versionID: t.VersionID, doc: d, runnable: ix.runnable[i]})
		ix.byName[t.Name] = i
		if w := embed.Words(t.Name); len(w) > 1 {
			ix.opens[s.tok.Stem(w[0])]++
		}
		docs[i] = d.terms
		vecs[i] = d.vec
		if len(d.vec.codes) > 0 {
			dims[len(d.vec.codes)]++
		}
		live[t.VersionID] = true
		if ix.entries[i].runnable {
			by := ix.tokens[t.Category]
			if by == nil {
				by = map[string]int{}
				ix.tokens[t.Category] = by
			}
			for f, size := range d.sizes {
				by[f] += size / 4
			}
		}
	}
	ix.lex = newBM25(docs, s.cfg.tune.bm25)
	if s.cfg.tune.nameGrams > 0 && s.cfg.local {
		names := make([][]string, len(tools))
		for i, t := range tools {
			names[i] = nameGrams(t.Name)
		}
		ix.names = newBM25(names, s.cfg.tune.bm25)
	}
	// Vectors of another dimension (left from another model) cannot meet
	// the query's; the most common dimension is the model's.
	dim := 0
	for d, c := range dims {
		if c > dims[dim] || c == dims[dim] && d > dim {
			dim = d
		}
	}
	_, _, centre := s.denseTuning()
	ix.vecs = newDenseIndex(vecs, dim, centre)
	// Versions no longer current are not needed.
	for id := range s.catalog.docs {
		if !live[id] {
			delete(s.catalog.docs, id)
		}
	}
	return ix
}
