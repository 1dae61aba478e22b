// Package selection is the select stage: it keeps an in-memory index of
// the active catalog (embedding vectors, BM25 postings, learned queries)
// and answers which 10 to 15 tools fit a task, within the caller's grants
// and what the host can run; it records each selection and learns from
// feedback. The retrieval benchmark measures it on labelled queries.
package selection

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/agnivade/levenshtein"

	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/embed"
	"toolbelt/services/formats"
	"toolbelt/services/ops"
	"toolbelt/services/tooldef"
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

// Selector is the select stage: it keeps an in-memory index of the active
// catalog (vectors, lexical postings, learned queries) and answers which
// tools fit a task.
type Selector struct {
	store *models.Store
	authz *access.Authz
	emb   embed.Embedder
	// local: emb is the built-in embedder (fast, lexical), whatever wraps it.
	local bool
	// dims says the model's vector dimension (0 before it is known), so
	// stored vectors of another dimension are embedded again.
	dims interface{ Dim() int }
	// queries caches query vectors by model and text.
	queries *embed.QueryCache
	tok     *embed.Tokenizer // the terms of tool texts, learned queries and queries
	host    ops.HostCaps
	// metrics receives selection latency.
	metrics *ops.Metrics
	log     *slog.Logger
	keep    int
	tune    tuning

	mu       sync.Mutex // serializes refreshes
	docs     map[uint]*docInfo
	idx      atomic.Pointer[index]
	learned  atomic.Pointer[learnedIndex]
	recorder *selectionRecorder

	learnOnce sync.Once
	lessons   chan callSeen
	learnWG   sync.WaitGroup
	// jobs are the selector's own goroutines (the learning worker, a
	// background re-embed, a deferred refresh): Close cancels ctx and
	// waits for them, so none outlives the store. closed (under jobsMu)
	// refuses new ones.
	ctx    context.Context
	cancel context.CancelFunc
	jobsMu sync.Mutex
	closed bool
	jobs   sync.WaitGroup
	dirty  atomic.Bool // the catalog changed since the last refresh
	// observations are what observe measured last per session and tool.
	observations *expirable.LRU[string, observation]
	// onLearned tells the other instances which tools' learned queries
	// changed here (OnLearned).
	onLearned func(ctx context.Context, tools []string)
	// refreshing is set while Refresh builds a new index.
	refreshing atomic.Bool
	timer      atomic.Bool // a deferred refresh is scheduled
	loaded     bool        // learned queries read from the store

	embedFailUntil atomic.Int64 // unix nanoseconds; query embedding backs off until then
	embedFails     atomic.Int64 // query embedding failures in a row; 0 once the model answers
	embedErr       atomic.Value // string: the last query embedding error

	embedding atomic.Bool  // a background re-embed runs
	embedDone atomic.Int64 // its progress
	embedAll  atomic.Int64
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
	// tokens is, per category and format, the token estimate of the
	// entries this host can run, so a selection's catalog estimate costs
	// a sum per category instead of a pass over the catalog.
	tokens map[string]map[string]int
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

// NewSelector returns a selector over the store using emb. keep caps the
// learned queries per tool (0: DefaultKeepLearned).
func NewSelector(store *models.Store, authz *access.Authz, emb embed.Embedder, host ops.HostCaps, keep int, log *slog.Logger) *Selector {
	if keep <= 0 {
		keep = DefaultKeepLearned
	}
	s := &Selector{store: store, authz: authz, emb: emb, tok: embed.NewTokenizer(), host: host, log: log, keep: keep, docs: map[uint]*docInfo{},
		recorder: newSelectionRecorder(store, log), queries: embed.NewQueryCache(0), tune: defaultTuning(),
		observations: expirable.NewLRU[string, observation](10_000, nil, observationTTL)}
	_, s.local = emb.(*embed.Builtin)
	s.dims, _ = emb.(interface{ Dim() int })
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.idx.Store(&index{byName: map[string]int{}, lex: newBM25(nil, bm25Params{})})
	s.learned.Store(newLearnedIndex(emb.Model(), s.tok, nil))
	return s
}

// MarkDirty notes that the catalog changed. The index is rebuilt before
// the next selection needs it, or shortly after in the background; a burst
// of registrations costs one rebuild, not one each.
func (s *Selector) MarkDirty() {
	s.dirty.Store(true)
	if s.timer.CompareAndSwap(false, true) {
		time.AfterFunc(100*time.Millisecond, func() {
			s.timer.Store(false)
			s.goJob(func() {
				if err := s.ensureFresh(s.ctx); err != nil && s.ctx.Err() == nil {
					s.log.Error("refresh the selection index", "err", err)
				}
			})
		})
	}
}

// ensureFresh rebuilds the index if the catalog changed since, or waits
// for the rebuild under way.
func (s *Selector) ensureFresh(ctx context.Context) error {
	if !s.dirty.Load() && !s.refreshing.Load() {
		return nil
	}
	// A refresh under way (the deferred one MarkDirty schedules) cleared
	// dirty when it started; it may hold a change this caller made before
	// asking, so wait for its index instead of answering from the old one.
	// Callers that saw dirty together rebuild once: the first one.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dirty.Load() {
		return s.refreshLocked(ctx)
	}
	return nil
}

// Close learns the lessons queued, stops the selector's goroutines and
// waits for them, and writes the selection records still queued; call it
// before the database closes. It is safe to call twice.
func (s *Selector) Close() {
	s.jobsMu.Lock()
	s.closed = true
	s.jobsMu.Unlock()
	s.learnWG.Wait()
	s.cancel()
	s.jobs.Wait()
	s.recorder.close()
}

// goJob runs f on a goroutine Close waits for; false once the selector
// is closed.
func (s *Selector) goJob(f func()) bool {
	s.jobsMu.Lock()
	defer s.jobsMu.Unlock()
	if s.closed {
		return false
	}
	s.jobs.Add(1)
	go func() {
		defer s.jobs.Done()
		f()
	}()
	return true
}

// Host returns what this host can run.
func (s *Selector) Host() ops.HostCaps { return s.host }

// EmbedModel names the embedder's model the index is built with.
func (s *Selector) EmbedModel() string { return s.emb.Model() }

// Status describes the embedder and any background re-embedding, for
// /readyz and the logs.
func (s *Selector) Status() string {
	st := fmt.Sprintf("%s, %d tools indexed", s.emb.Model(), len(s.idx.Load().entries))
	if s.embedding.Load() {
		st += fmt.Sprintf(", re-embedding %d/%d", s.embedDone.Load(), s.embedAll.Load())
	}
	if s.EmbedFailing() {
		msg, _ := s.embedErr.Load().(string)
		st += "; query embedding failing, ranking lexically: " + msg
	}
	return st
}

// EmbedFailing reports whether the last query embedding failed: from then
// until the model answers again, queries it has not embedded before rank
// lexically.
func (s *Selector) EmbedFailing() bool { return s.embedFails.Load() > 0 }

// Embedded reports how many indexed tools have a vector under the current
// model, of how many, and whether a background re-embed is under way.
func (s *Selector) Embedded() (withVector, tools int, running bool) {
	running = s.embedding.Load()
	ix := s.idx.Load()
	for _, e := range ix.entries {
		if len(e.doc.vec.codes) > 0 {
			withVector++
		}
	}
	return withVector, len(ix.entries), running
}

// WaitEmbedded waits until every indexed tool has a vector under the
// current model: a remote model embeds a large catalog in the background
// while selection ranks lexically, so a measurement must wait for it. When
// a background re-embed ends with tools still missing one, it refreshes
// (which builds the index from the new vectors, or embeds again what is
// missing) a few times before giving up.
func (s *Selector) WaitEmbedded(ctx context.Context) error {
	for refreshes := 0; ; {
		with, all, running := s.Embedded()
		switch {
		case with == all:
			return nil
		case !running && refreshes == 3:
			return fmt.Errorf("%d of %d tools have no vector under %s: the embedder failed", all-with, all, s.EmbedModel())
		case !running:
			refreshes++
			if err := s.Refresh(ctx); err != nil {
				return err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// dimOK reports whether a stored vector of n dimensions fits the model.
func (s *Selector) dimOK(n int) bool {
	if s.dims == nil {
		return true
	}
	d := s.dims.Dim()
	return d == 0 || n == d
}

// retrievalTexts returns the text a tool is found by, lexical: its name
// with words split, description, category, tags, parameter names and
// descriptions, and examples; and the text a real model embeds, model,
// which reads "name: description" and has no category: a one-word label
// that every tool of the category shares pulls their vectors together,
// while BM25 and the category filter use it as it is (+0.3 Recall@10 cold
// under USE-lite, docs/benchmarks.md#tuning).
func retrievalTexts(def *tooldef.Definition) (lexical, model string) {
	name := strings.Join(embed.Words(def.Name), " ")
	rest := retrievalDetails(def)
	return name + ". " + def.Description + "\nCategory: " + def.Category + rest, name + ": " + def.Description + rest
}

// retrievalDetails is what both retrieval texts end with: tags,
// parameters, and examples, a line each. A parameter's line holds its
// name (with its parents', for the properties of an object or of an
// array's items, to paramDepth levels), its description, and the values
// an enum allows (the first enumShown): what an agent's task names, as
// "in fahrenheit" or "on Delta".
func retrievalDetails(def *tooldef.Definition) string {
	var b strings.Builder
	if len(def.Tags) > 0 {
		b.WriteString("\nTags: " + strings.Join(def.Tags, ", "))
	}
	var schema map[string]any
	if json.Unmarshal(def.Parameters, &schema) == nil {
		writeParams(&b, "", schema, paramDepth)
	}
	for _, e := range def.Examples {
		b.WriteString("\nExample: " + e)
	}
	return b.String()
}

// paramDepth is how deep nested properties are read; enumShown how many of
// an enum's values.
const (
	paramDepth = 3
	enumShown  = 20
)

// writeParams writes a line for each property of an object schema, in
// name order, then the lines of its nested properties.
func writeParams(b *strings.Builder, parent string, schema map[string]any, depth int) {
	props, _ := schema["properties"].(map[string]any)
	for _, k := range slices.Sorted(maps.Keys(props)) {
		name := strings.TrimSpace(parent + " " + strings.Join(embed.Words(k), " "))
		b.WriteString("\nParameter " + name)
		p, _ := props[k].(map[string]any)
		if d, ok := p["description"].(string); ok {
			b.WriteString(": " + d)
		}
		if values := enumText(p); values != "" {
			b.WriteString(" (one of: " + values + ")")
		}
		if depth <= 1 || p == nil {
			continue
		}
		if items, ok := p["items"].(map[string]any); ok {
			p = items
		}
		writeParams(b, name, p, depth-1)
	}
}

// enumText is the first enumShown string values of a schema's enum.
func enumText(schema map[string]any) string {
	values, _ := schema["enum"].([]any)
	var out []string
	for _, v := range values {
		if s, ok := v.(string); ok && len(out) < enumShown {
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}

// Refresh rebuilds the index from the store: new versions get their
// retrieval text and vector (stored, so a restart re-embeds nothing),
// learned queries are reloaded. It is called at start and after every
// catalog or learning change.
func (s *Selector) Refresh(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshLocked(ctx)
}

// refreshLocked is Refresh with s.mu held.
func (s *Selector) refreshLocked(ctx context.Context) error {
	s.refreshing.Store(true)
	defer s.refreshing.Store(false)
	s.dirty.Store(false)
	tools, err := s.store.ActiveTools(ctx)
	if err != nil {
		return err
	}
	var missing []uint
	for _, t := range tools {
		if _, ok := s.docs[t.VersionID]; !ok {
			missing = append(missing, t.VersionID)
		}
	}
	if err := s.loadDocs(ctx, missing); err != nil {
		return err
	}
	var learned []models.LearnedQuery
	if !s.loaded {
		if learned, err = s.store.LearnedQueries(ctx, ""); err != nil {
			return err
		}
	}
	job := s.missing(tools, learned)
	switch {
	case job.size() > inlineEmbedLimit && !s.local:
		if s.embedding.CompareAndSwap(false, true) && !s.goJob(s.backgroundEmbed) {
			s.embedding.Store(false)
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
	if !s.loaded {
		s.learned.Store(newLearnedIndex(s.emb.Model(), s.tok, learned))
		s.loaded = true
	}
	s.idx.Store(s.build(tools))
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
		if s.local {
			vtext = text
		}
		sum := sha256.Sum256([]byte(vtext))
		d := &docInfo{text: vtext, hash: hex.EncodeToString(sum[:]), needs: needsOf(&def), sizes: sizes[id]}
		d.terms = s.tok.Terms(text)
		for range s.tune.nameRepeat {
			d.terms = append(d.terms, s.tok.Terms(strings.Join(embed.Words(def.Name), " "))...)
		}
		if e, ok := vecs[id]; ok && e.TextHash == d.hash && s.dimOK(len(e.Vector)/4) {
			d.vec = quantise(decodeVector(e.Vector))
		}
		s.docs[id] = d
	}
	return nil
}

// embedJob is the texts that have no vector under the current model.
type embedJob struct {
	versionIDs []uint
	texts      []string
	learned    []models.LearnedQuery
}

func (j embedJob) size() int { return len(j.texts) + len(j.learned) }

// missing collects what needs embedding; s.mu is held.
func (s *Selector) missing(tools []models.ActiveTool, learned []models.LearnedQuery) embedJob {
	var j embedJob
	for _, t := range tools {
		// A version registered since the last refresh has no docInfo yet;
		// the next refresh picks it up.
		if d := s.docs[t.VersionID]; d != nil && d.vec.codes == nil {
			j.versionIDs = append(j.versionIDs, t.VersionID)
			j.texts = append(j.texts, d.text)
		}
	}
	model := s.emb.Model()
	for _, q := range learned {
		if q.Model != model || !s.dimOK(len(q.Vector)/4) {
			j.learned = append(j.learned, q)
		}
	}
	return j
}

// embedJobTexts embeds a job in batches, counting progress. It needs no
// lock, so a long re-embed does not hold up registrations.
func (s *Selector) embedJobTexts(ctx context.Context, j embedJob) (docs, queries [][]float32, err error) {
	batches := func(kind embed.Kind, texts []string) ([][]float32, error) {
		var out [][]float32
		for start := 0; start < len(texts); start += 64 {
			vecs, err := s.emb.Embed(ctx, kind, texts[start:min(start+64, len(texts))])
			if err != nil {
				return nil, err
			}
			out = append(out, vecs...)
			s.embedDone.Add(int64(len(vecs)))
		}
		return out, nil
	}
	if docs, err = batches(embed.Document, j.texts); err != nil {
		return nil, nil, err
	}
	qs := make([]string, len(j.learned))
	for i, q := range j.learned {
		qs[i] = q.Query
	}
	if queries, err = batches(embed.Query, qs); err != nil {
		return nil, nil, err
	}
	return docs, queries, nil
}

// applyJob stores the vectors and gives the selector new docInfos holding
// them (index snapshots in use keep the old ones); s.mu is held.
func (s *Selector) applyJob(ctx context.Context, j embedJob, docs, queries [][]float32) error {
	model := s.emb.Model()
	rows := make([]models.ToolEmbedding, 0, len(docs))
	for i, v := range docs {
		old, ok := s.docs[j.versionIDs[i]]
		if !ok || old.text != j.texts[i] {
			continue // retired or changed while embedding
		}
		d := *old
		d.vec = quantise(v)
		s.docs[j.versionIDs[i]] = &d
		rows = append(rows, models.ToolEmbedding{VersionID: j.versionIDs[i], Model: model, TextHash: d.hash, Vector: encodeVector(v)})
	}
	if err := s.store.SaveEmbeddings(ctx, rows); err != nil {
		return err
	}
	for i := range j.learned {
		j.learned[i].Model, j.learned[i].Vector = model, encodeVector(queries[i])
	}
	return s.store.SaveLearnedVectors(ctx, j.learned)
}

// backgroundEmbed re-embeds everything missing (after a model change),
// logging progress, and refreshes the index when done.
func (s *Selector) backgroundEmbed() {
	defer s.embedding.Store(false)
	ctx := s.ctx // Close stops it
	s.mu.Lock()
	tools, err := s.store.ActiveTools(ctx)
	var learned []models.LearnedQuery
	if err == nil {
		learned, err = s.store.LearnedQueries(ctx, "")
	}
	var job embedJob
	if err == nil {
		job = s.missing(tools, learned)
	}
	s.mu.Unlock()
	if err != nil {
		s.log.Error("re-embed: load catalog", "err", err)
		return
	}
	s.embedDone.Store(0)
	s.embedAll.Store(int64(job.size()))
	s.log.Info("re-embedding the catalog in the background", "model", s.emb.Model(), "texts", job.size())
	start := time.Now()
	docs, queries, err := s.embedJobTexts(ctx, job)
	if err == nil {
		s.mu.Lock()
		err = s.applyJob(ctx, job, docs, queries)
		s.mu.Unlock()
	}
	if err != nil {
		s.log.Error("re-embed failed; texts without vectors rank lexically", "err", err, "done", s.embedDone.Load())
		return
	}
	s.log.Info("re-embedding finished", "texts", job.size(), "duration", time.Since(start).Round(time.Millisecond))
	s.embedding.Store(false)
	s.mu.Lock()
	s.loaded = false // reload learned queries with their new vectors
	s.mu.Unlock()
	if err := s.Refresh(ctx); err != nil {
		s.log.Error("refresh after re-embed", "err", err)
	}
}

// build makes an index snapshot of the catalog; s.mu is held.
func (s *Selector) build(tools []models.ActiveTool) *index {
	ix := &index{byName: make(map[string]int, len(tools)), keep: denseKeep(len(tools)), tokens: map[string]map[string]int{}}
	docs := make([][]string, len(tools))
	vecs := make([]qvec, len(tools))
	dims := map[int]int{}
	live := make(map[uint]bool, len(tools))
	for i, t := range tools {
		d := s.docs[t.VersionID]
		ix.runnable = append(ix.runnable, d.needs.metBy(s.host))
		ix.cat = append(ix.cat, categoryID(t.Category))
		ix.entries = append(ix.entries, &entry{name: t.Name, category: t.Category, level: t.Level, versionID: t.VersionID, doc: d, runnable: ix.runnable[i]})
		ix.byName[t.Name] = i
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
	ix.lex = newBM25(docs, s.tune.bm25)
	if s.tune.nameGrams > 0 && s.local {
		names := make([][]string, len(tools))
		for i, t := range tools {
			names[i] = nameGrams(t.Name)
		}
		ix.names = newBM25(names, s.tune.bm25)
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
	for id := range s.docs {
		if !live[id] {
			delete(s.docs, id)
		}
	}
	return ix
}

func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func decodeVector(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// SelectRequest asks which tools fit a task.
type SelectRequest struct {
	// Query is the task, as long as the agent has it (a system prompt
	// followed by the request, say); Messages the conversation, in the
	// LLM APIs' chat format. One of them is needed.
	Query             string    `json:"query" example:"summarise the CSV files in this folder"`
	Messages          []Message `json:"messages,omitempty"`
	SessionID         string    `json:"session_id,omitempty" example:"run-42"`
	Limit             int       `json:"limit,omitempty" example:"12"`
	Categories        []string  `json:"categories,omitempty"`
	ExcludeCategories []string  `json:"exclude_categories,omitempty"`
	Format            string    `json:"format,omitempty" example:"openai" enums:"openai,openai_responses,anthropic,gemini,mcp"`
	// MinScore drops tools scoring less (0 to 1; default DefaultMinScore).
	MinScore *float64 `json:"min_score,omitempty" example:"0.05" minimum:"0" maximum:"1"`
	// task is Query and Messages as ranked (checkRequest composes it).
	task task
}

// Selected is one chosen tool with why it was chosen.
type Selected struct {
	Name          string `json:"name" example:"file_list"`
	Category      string `json:"category" example:"filesystem"`
	SecurityLevel string `json:"security_level" example:"safe"`
	// Score is the tool's relevance, 0 to 1 on the same scale for every
	// query (docs/selection.md#scores).
	Score   float64         `json:"score" example:"0.72"`
	Reasons Reasons         `json:"reasons"`
	Tool    json.RawMessage `json:"tool" swaggertype:"object"`
}

// Reasons explains a tool's rank.
type Reasons struct {
	DenseSimilarity float64  `json:"dense_similarity" example:"0.42"`
	DenseRank       int      `json:"dense_rank,omitempty" example:"3"`
	LexicalScore    float64  `json:"lexical_score" example:"7.1"`
	LexicalRank     int      `json:"lexical_rank,omitempty" example:"1"`
	MatchedTerms    []string `json:"matched_terms"`
	LearnedQueries  []string `json:"learned_queries,omitempty"`
}

// TokenEstimate compares the selection's size with the whole catalog the
// caller may see, in the requested format (about four characters a token).
type TokenEstimate struct {
	Selection int     `json:"selection" example:"1450"`
	Catalog   int     `json:"catalog" example:"48200"`
	Saved     float64 `json:"saved_ratio" example:"0.97"`
}

// SelectResult answers a selection.
type SelectResult struct {
	SelectionID string `json:"selection_id" example:"9f2c4e1a7b3d5f60"`
	// Query is the focus ranked at full weight: the query, or the last
	// user message, cut to its last paragraphs (FocusChars); ContextChars
	// how much of the rest was weighed as context.
	Query        string     `json:"query"`
	ContextChars int        `json:"context_chars" example:"0"`
	Format       string     `json:"format" example:"openai"`
	Embedder     string     `json:"embedder" example:"builtin/hash-v1-256+words-v1-64-9c7dbae4"`
	Tools        []Selected `json:"tools"`
	// NoGoodMatch is true when no tool scores GoodMatchScore or more:
	// the tools returned (maybe none) fit the task poorly, and Hint says
	// what to do.
	NoGoodMatch bool          `json:"no_good_match"`
	Hint        string        `json:"hint,omitempty" example:"no tool fits this task well (best score 0.04); describe the action and the object, or ask an admin to register a tool for it"`
	Tokens      TokenEstimate `json:"tokens"`
	// ToolReferences, with format anthropic, name the tools as the
	// tool_reference blocks of Anthropic's tool search: the content of the
	// tool_result an agent answers its search tool's call with.
	ToolReferences []formats.ToolReference `json:"tool_references,omitempty"`
	// committed receives the result of the selection record's write.
	committed <-chan error
}

// Committed returns once the record of res is committed, with the write's
// error; an HTTP answer waits for it, so the selection id it hands out
// survives a crash.
func (s *Selector) Committed(ctx context.Context, res *SelectResult) error {
	if res.committed == nil {
		return nil
	}
	return s.recorder.batch.Wait(ctx, res.committed)
}

// visibility decides which tools a caller may be offered.
type visibility struct {
	all        bool
	categories map[string]bool
	tools      map[string]bool
}

// visibilityOf reads a caller's grants once per selection. Admins and
// reviewers see the whole catalog; an agent sees a safe tool it holds by
// name or category, and a moderate or dangerous tool only through its
// category (dangerous ones then need approval at call time).
func (s *Selector) visibilityOf(caller *models.Principal) (visibility, error) {
	if caller == nil || caller.Role != access.RoleAgent {
		return visibility{all: true}, nil
	}
	g, err := s.authz.Grants(caller.ID)
	if err != nil {
		return visibility{}, err
	}
	v := visibility{categories: map[string]bool{}, tools: map[string]bool{}}
	for _, c := range g.Categories {
		v.categories[c] = true
	}
	for _, t := range g.Tools {
		v.tools[t] = true
	}
	return v, nil
}

func (v visibility) allows(e *entry) bool {
	if v.all {
		return true
	}
	if v.categories[e.category] {
		return true
	}
	return e.level == tooldef.LevelSafe && v.tools[e.name]
}

// Callable returns, in name order and after the tool named after, up to
// limit tools the caller may call and this host can run, each in format;
// next names the last one when more follow, "" on the last page. It is the
// catalog an MCP client lists: admins get every tool, agents what their
// grants let selection offer them, reviewers nothing, since they decide
// approvals and call no tool.
func (s *Selector) Callable(ctx context.Context, caller *models.Principal, format, after string, limit int) (tools []json.RawMessage, next string, err error) {
	if !slices.Contains(formats.Formats, format) {
		return nil, "", formats.UnknownFormat(format)
	}
	if limit < 1 {
		return nil, "", models.ErrInvalid.Errorf("page size %d", limit)
	}
	if caller != nil && caller.Role == access.RoleReviewer {
		return []json.RawMessage{}, "", nil
	}
	if err := s.ensureFresh(ctx); err != nil {
		return nil, "", err
	}
	vis, err := s.visibilityOf(caller)
	if err != nil {
		return nil, "", err
	}
	ix := s.idx.Load()
	// Entries are in name order (the store lists them so), so a page
	// starts after its cursor without scanning what came before.
	start := sort.Search(len(ix.entries), func(i int) bool { return ix.entries[i].name > after })
	var page []*entry
	for _, e := range ix.entries[start:] {
		if !vis.allows(e) || !e.runnable {
			continue
		}
		if len(page) == limit {
			next = page[len(page)-1].name
			break
		}
		page = append(page, e)
	}
	ids := make([]uint, len(page))
	for i, e := range page {
		ids[i] = e.versionID
	}
	exports, err := s.store.Exports(ctx, format, ids)
	if err != nil {
		return nil, "", err
	}
	tools = make([]json.RawMessage, 0, len(page))
	for _, e := range page {
		if raw, ok := exports[e.versionID]; ok {
			tools = append(tools, json.RawMessage(raw))
		}
	}
	return tools, next, nil
}

// Select ranks the catalog for a task and returns the best tools the caller
// may use and this host can run, in the requested format, and records the
// selection so later use can teach the index.
func (s *Selector) Select(ctx context.Context, caller *models.Principal, req SelectRequest) (*SelectResult, error) {
	defer func(start time.Time) { s.metrics.Selected(time.Since(start)) }(time.Now())
	if err := s.checkRequest(&req); err != nil {
		return nil, err
	}
	if err := s.ensureFresh(ctx); err != nil {
		return nil, err
	}
	vis, err := s.visibilityOf(caller)
	if err != nil {
		return nil, err
	}
	ix := s.idx.Load()
	include := toSet(req.Categories)
	exclude := toSet(req.ExcludeCategories)
	ranked := s.rank(ctx, ix, req.task, scope{vis: vis, include: include, exclude: exclude, minScore: *req.MinScore}, req.Limit)
	best := 0.0
	if len(ranked) > 0 {
		best = ranked[0].score
	}
	ranked = slices.DeleteFunc(ranked, func(r rankedTool) bool { return r.score < *req.MinScore })
	res := &SelectResult{Query: req.task.focus, ContextChars: utf8.RuneCountInString(req.task.context), Format: req.Format,
		Embedder: s.emb.Model(), Tools: []Selected{}}
	if best < GoodMatchScore {
		res.NoGoodMatch = true
		res.Hint = fmt.Sprintf("no tool fits this task well (best score %.2f, a good match scores %.2f or more); describe the action and the object it acts on, or ask an admin to register a tool for it", best, GoodMatchScore)
	}
	ids := make([]uint, len(ranked))
	for i, r := range ranked {
		ids[i] = ix.entries[r.entry].versionID
	}
	exports, err := s.store.Exports(ctx, req.Format, ids)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ranked))
	for _, r := range ranked {
		e := ix.entries[r.entry]
		res.Tools = append(res.Tools, Selected{
			Name: e.name, Category: e.category, SecurityLevel: e.level, Score: round(r.score, 5),
			Reasons: r.reasons, Tool: json.RawMessage(exports[e.versionID]),
		})
		names = append(names, e.name)
		res.Tokens.Selection += e.doc.sizes[req.Format] / 4
	}
	if req.Format == formats.FormatAnthropic {
		res.ToolReferences = formats.ToolReferences(names)
	}
	res.Tokens.Catalog = ix.catalogTokens(vis, s.host, req.Format)
	if res.Tokens.Catalog > 0 {
		res.Tokens.Saved = round(1-float64(res.Tokens.Selection)/float64(res.Tokens.Catalog), 3)
	}
	sel := &models.Selection{ID: models.NewID(), SessionID: req.SessionID, Query: req.task.focus, Tools: "," + strings.Join(names, ",") + ","}
	if caller != nil {
		sel.PrincipalID = caller.ID
	}
	res.committed = s.recorder.record(ctx, sel)
	res.SelectionID = sel.ID
	return res, nil
}

func (s *Selector) checkRequest(req *SelectRequest) error {
	var ps models.Problems
	req.Query = strings.TrimSpace(req.Query)
	t, tps := taskOf(req.Query, req.Messages)
	ps = append(ps, tps...)
	req.task = t
	if req.Limit == 0 {
		req.Limit = DefaultSelectLimit
	}
	if req.Limit < 1 || req.Limit > MaxSelectLimit {
		ps.Add("/limit", "must be between 1 and %d", MaxSelectLimit)
	}
	if req.Format == "" {
		req.Format = formats.FormatOpenAI
	}
	if !slices.Contains(formats.Formats, req.Format) {
		ps.Add("/format", "%q is not a format; use one of %s", req.Format, strings.Join(formats.Formats, ", "))
	}
	for i, c := range req.Categories {
		if !slices.Contains(tooldef.Categories, c) {
			ps.Add(fmt.Sprintf("/categories/%d", i), "%q is not a category; use one of %s", c, strings.Join(tooldef.Categories, ", "))
		}
	}
	for i, c := range req.ExcludeCategories {
		if !slices.Contains(tooldef.Categories, c) {
			ps.Add(fmt.Sprintf("/exclude_categories/%d", i), "%q is not a category; use one of %s", c, strings.Join(tooldef.Categories, ", "))
		}
	}
	if len(req.SessionID) > 128 {
		ps.Add("/session_id", "is longer than 128 characters")
	}
	if req.MinScore == nil {
		req.MinScore = new(float64(DefaultMinScore))
	} else if m := *req.MinScore; !(m >= 0 && m <= 1) {
		ps.Add("/min_score", "must be between 0 and 1 (scores are on that scale); the default is %g", DefaultMinScore)
	}
	if len(ps) > 0 {
		return &models.ValidationError{What: "selection request", Problems: ps}
	}
	return nil
}

// rankedTool is one tool in a ranking.
type rankedTool struct {
	entry   int
	score   float64
	reasons Reasons
}

// tuning holds the ranking's weights (docs/selection.md): one value per
// selector, defaultTuning, so that a sweep (tune_test.go) can vary it.
type tuning struct {
	// lexical is the weight of BM25 over the tools' own text.
	lexical float64
	// nameGrams is BM25 over the character 4-grams of the tools' names:
	// a name is the shortest account of what a tool does, and often
	// words run together or cut short, which whole words miss. Under the
	// built-in embedder only: a real model reads sub-words itself, and
	// the grams cost it (docs/benchmarks.md#tuning).
	nameGrams float64
	// learnedLexical is BM25 over queries that led to a tool: a past task
	// phrased like this one is the strongest evidence there is.
	learnedLexical float64
	// learnedDense is the similarity to the centroid of those queries.
	learnedDense float64
	// learnedNear is the similarity to the nearest of them, counted from
	// nearFloor (0) to 1, for the nearPool tools leading after the other
	// signals, each compared with its newest nearPerTool queries (so the
	// cost is bounded whatever was learned); under a real model only.
	learnedNear           float64
	nearFloor             float32
	nearPool, nearPerTool int
	// modelDense is the dense similarity under a real embedding model;
	// builtinDense under the built-in embedder, whose hashed part
	// re-counts what BM25 counts and whose word vectors add some meaning:
	// less than a model's.
	modelDense, builtinDense float64
	// modelCentre and builtinCentre are the prior of the centring of the
	// tools' vectors (dense.go): the catalog's mean vector is taken from
	// each, times n/(n+prior) for n tools; 0 is none.
	modelCentre, builtinCentre float64
	// modelCoverage is the share of a tool's score under a real model
	// that the query's words unknown to the catalog take away (rank.go):
	// 0.5 leaves gibberish under GoodMatchScore (200 random-letter
	// queries of 1 to 4 words, all) and 34 of MetaTool's 4,264 dev
	// queries.
	modelCoverage float64
	// learnedFull: a learned query holding this share of the query's term
	// weight, or a centroid at this cosine, counts in full; fainter ones
	// count in proportion, so when few tools have learned anything a
	// faint likeness to their queries stays faint.
	learnedFull float32
	// learnedFloor is the cosine a tool's centroid of learned queries
	// has to an unrelated task by chance: only the likeness above it
	// counts (with word vectors, the built-in embedder gives unrelated
	// tasks 0.2 to 0.3, as real models do).
	learnedFloor float32
	// modelDenseTop and builtinDenseTop are how many tools the dense
	// ranking contributes before fusion.
	modelDenseTop, builtinDenseTop int
	// bm25 are BM25's parameters over the tools' text and names;
	// learnedBM25 over learned queries.
	bm25, learnedBM25 bm25Params
	// nameRepeat is how many times a tool's name words count in its BM25
	// text beyond the once they have there.
	nameRepeat int
}

// defaultTuning is the ranking's tuning, swept on the MetaTool dev and
// history splits (docs/benchmarks.md#tuning). Each signal is scaled by
// the score that counts as full evidence, the same for every query
// (capped at 1), then weighted and summed; calibrated maps the sum to the
// reported score.
func defaultTuning() tuning {
	return tuning{
		lexical: 1, nameGrams: 1, learnedLexical: 3, learnedDense: 1,
		learnedNear: 2, nearFloor: 0.5, nearPool: 40, nearPerTool: 256,
		modelDense: 1.5, builtinDense: 0.8, modelCentre: 32, builtinCentre: 1, learnedFloor: 0.2, modelCoverage: 0.5, modelDenseTop: 80, builtinDenseTop: 40, learnedFull: 0.5,
		// Tool texts are short and of like length: their length says
		// little, so b is low.
		bm25: bm25Params{k1: 1.2, b: 0.3}, learnedBM25: bm25Params{k1: 1.2, b: 0.75},
		nameRepeat: 1,
	}
}

func (s *Selector) denseTuning() (weight float64, top int, centre float64) {
	if s.local {
		return s.tune.builtinDense, s.tune.builtinDenseTop, s.tune.builtinCentre
	}
	return s.tune.modelDense, s.tune.modelDenseTop, s.tune.modelCentre
}

// Query embedding must not stall a selection: it gets a short deadline,
// and after a failure the embedder is left alone for a while (selection
// ranks lexically meanwhile, and /readyz says why). The pause doubles
// with each failure in a row, from embedRetryMin to embedRetryMax, so an
// embedder back from a blip is used again within seconds and one that is
// down costs a failed request at most every embedRetryMax.
const (
	queryEmbedTimeout = 2 * time.Second
	embedRetryMin     = time.Second
	embedRetryMax     = 30 * time.Second
)

// embedQuery returns the query's vector, from the cache when this model
// embedded the text before, or nil when the embedder fails or is backing
// off.
func (s *Selector) embedQuery(ctx context.Context, query string) []float32 {
	model := s.emb.Model()
	if v, ok := s.queries.Get(model, query); ok {
		return v
	}
	if until := s.embedFailUntil.Load(); until != 0 && time.Now().UnixNano() < until {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, queryEmbedTimeout)
	defer cancel()
	vecs, err := s.emb.Embed(ctx, embed.Query, []string{query})
	if err != nil || len(vecs) != 1 {
		if err == nil {
			err = fmt.Errorf("%d vectors for one query", len(vecs))
		}
		n := s.embedFails.Add(1)
		wait := min(embedRetryMin<<min(n-1, 5), embedRetryMax)
		s.embedFailUntil.Store(time.Now().Add(wait).UnixNano())
		s.embedErr.Store(err.Error())
		s.log.WarnContext(ctx, "embed query failed; ranking lexically", "err", err, "retry_in", wait)
		return nil
	}
	if s.embedFails.Swap(0) > 0 {
		s.log.InfoContext(ctx, "query embedding works again; dense ranking restored", "model", model)
	}
	s.embedFailUntil.Store(0)
	s.queries.Add(model, query, vecs[0])
	return vecs[0]
}

// wordStems are a query's words that are not stop words, each once in
// the order the query has them, with their stems: a ranking's reasons
// name those a tool's text holds, and stem them once, not once a tool.
type wordStems struct{ words, stems []string }

func queryWords(tok *embed.Tokenizer, query string) wordStems {
	var ws wordStems
	for _, w := range embed.Words(query) {
		if !embed.IsStopWord(w) && !slices.Contains(ws.words, w) {
			ws.words = append(ws.words, w)
			ws.stems = append(ws.stems, tok.Stem(w))
		}
	}
	return ws
}

// matched lists the query's words whose stems the tool's text holds.
func (ws wordStems) matched(docTerms []string) []string {
	out := []string{}
	for k, w := range ws.words {
		if slices.Contains(docTerms, ws.stems[k]) {
			out = append(out, w)
		}
	}
	return out
}

// Feedback teaches the index from a recorded selection: its query becomes
// retrieval text for each named tool (the tools the agent actually used,
// whether or not they were among those selected).
func (s *Selector) Feedback(ctx context.Context, caller *models.Principal, selectionID string, tools []string) ([]string, error) {
	sel, err := s.recorder.byID(ctx, selectionID)
	if err != nil {
		return nil, err
	}
	if caller != nil && caller.Role == access.RoleAgent && sel.PrincipalID != caller.ID {
		return nil, models.ErrForbidden.Errorf("selection %s was made by another principal", selectionID)
	}
	if err := s.ensureFresh(ctx); err != nil {
		return nil, err
	}
	vis, err := s.visibilityOf(caller)
	if err != nil {
		return nil, err
	}
	var ps models.Problems
	if len(tools) == 0 {
		ps.Add("/tools", "is required: name the tools the task used")
	}
	ix := s.idx.Load()
	for i, t := range tools {
		n, ok := ix.byName[t]
		switch {
		case !ok:
			ps.Add(fmt.Sprintf("/tools/%d", i), "tool %q is not in the catalog", t)
		case !vis.allows(ix.entries[n]):
			ps.Add(fmt.Sprintf("/tools/%d", i), "tool %q is not among the tools you may use", t)
		}
	}
	if len(ps) > 0 {
		return nil, &models.ValidationError{What: "feedback", Problems: ps}
	}
	return s.learn(ctx, sel, tooldef.Dedupe(tools), "feedback")
}

// LearnFromCall teaches the index that a session's latest selection led to
// a call of tool. Calls outside a selected session teach nothing.
func (s *Selector) LearnFromCall(ctx context.Context, sessionID, tool string) error {
	return s.observe(ctx, callSeen{session: sessionID, tool: tool, known: true, learn: true, at: time.Now().UTC()}, false)
}

// callSeen is a call as the selector measures and learns from it.
type callSeen struct {
	session, tool, callID string
	known                 bool      // the tool exists
	learn                 bool      // it succeeded, not from the cache: it teaches the index
	at                    time.Time // when the call was made
}

// ObserveCallLater queues, for a background worker, what a call of tool
// in a session says of the selection before it: the tool's rank there,
// or that it was not offered or does not exist (RetrievalOutcome, the
// toolbelt_retrieval_* metrics, the statistics), and, when learn (the call
// succeeded), a lesson for the index. A call never waits for this; it is
// best effort: when the queue is full it is dropped.
func (s *Selector) ObserveCallLater(sessionID, tool, callID string, known, learn bool) {
	seen := callSeen{session: sessionID, tool: tool, callID: callID, known: known, learn: learn, at: time.Now().UTC()}
	if sessionID == "" || s.observed(seen) {
		return // nothing to measure, or measured already (the cached reads of one file, say)
	}
	s.learnOnce.Do(func() {
		s.lessons = make(chan callSeen, 1024)
		s.goJob(s.learnLessons)
	})
	// A lesson counts once queued; none is taken after Close began, which
	// waits for those queued before the worker stops.
	s.jobsMu.Lock()
	if s.closed {
		s.jobsMu.Unlock()
		return
	}
	s.learnWG.Add(1)
	s.jobsMu.Unlock()
	select {
	case s.lessons <- seen:
	default:
		s.learnWG.Done()
	}
}

// learnLessons is the learning worker: it measures and learns queued
// calls until Close.
func (s *Selector) learnLessons() {
	for {
		select {
		case l := <-s.lessons:
			if err := s.observe(context.Background(), l, true); err != nil {
				s.log.Warn("observe call", "err", err, "session", l.session, "tool", l.tool)
			}
			s.learnWG.Done()
		case <-s.ctx.Done():
			return
		}
	}
}

// observe relates a call to the newest selection of its session made
// before it: measured when measure, learned from when l.learn. A tool
// called again after the same selection is measured and learned from
// once (observations): a repeated call — an agent reading one file again
// and again, from the cache — is no new evidence, and each had cost a
// lookup and a row.
func (s *Selector) observe(ctx context.Context, l callSeen, measure bool) error {
	if l.session == "" {
		return nil
	}
	key := l.session + "\x00" + l.tool
	seen, hadSeen := s.observations.Get(key)
	if s.settled(l, seen, hadSeen) {
		return nil
	}
	sel, err := s.recorder.lastOf(ctx, l.session, l.at)
	if errors.Is(err, models.ErrNotFound) {
		s.observations.Add(key, observation{})
		return nil
	}
	if err != nil {
		return err
	}
	again := hadSeen && seen.selection == sel.ID
	if again {
		measure = false // measured already: only the lesson may be new
	}
	learn := l.learn && !(again && seen.learned)
	s.observations.Add(key, observation{selection: sel.ID, learned: l.learn || again && seen.learned})
	if measure {
		rank := 0
		for i, name := range strings.Split(strings.Trim(sel.Tools, ","), ",") {
			if name == l.tool {
				rank = i + 1
				break
			}
		}
		tool := l.tool
		if utf8.RuneCountInString(tool) > 64 { // an invented name may be anything
			tool = head(tool, 64)
		}
		o := &models.RetrievalOutcome{CallID: l.callID, SessionID: l.session, SelectionID: sel.ID, Tool: tool,
			Rank: rank, Known: l.known, CreatedAt: l.at}
		if err := s.store.CreateRetrievalOutcome(ctx, o); err != nil {
			return err
		}
		s.metrics.Retrieved(l.tool, l.known, rank)
	}
	if !learn {
		return nil
	}
	_, err = s.learn(ctx, sel, []string{l.tool}, "call")
	return err
}

// observed reports whether observe would do nothing for l: the tool was
// measured against the session's newest selection known here (or against
// none) already, and there is nothing new to learn.
func (s *Selector) observed(l callSeen) bool {
	seen, ok := s.observations.Get(l.session + "\x00" + l.tool)
	return s.settled(l, seen, ok)
}

// settled is observed's rule for what observe last did for l's session
// and tool (seen, when ok).
func (s *Selector) settled(l callSeen, seen observation, ok bool) bool {
	return ok && seen.selection == s.recorder.lastKnown(l.session, l.at) && (seen.learned || !l.learn || seen.selection == "")
}

// observation is what observe did for a session's tool last: the
// selection it measured the call against ("" for none) and whether it
// learned from it.
type observation struct {
	selection string
	learned   bool
}

// observationTTL bounds how long observe trusts that a session has no
// newer selection than the one it saw: a selection made on another
// instance is found after at most this long. (A tool called again after
// longer is measured again.)
const observationTTL = 30 * time.Second

// WaitLearning waits until queued lessons are learned (tests, shutdown).
func (s *Selector) WaitLearning() { s.learnWG.Wait() }

func (s *Selector) learn(ctx context.Context, sel *models.Selection, tools []string, source string) ([]string, error) {
	model := s.emb.Model()
	var vec []byte
	if v := s.embedQuery(ctx, sel.Query); v != nil {
		vec = encodeVector(v) // usually cached: the selection embedded it
	} else {
		model = ""
	}
	var learned []string
	li := s.learned.Load()
	for _, t := range tools {
		q := models.LearnedQuery{ToolName: t, Query: sel.Query, Source: source, SelectionID: sel.ID, Model: model, Vector: vec}
		added, dropped, err := s.store.AddLearnedQuery(ctx, &q, s.keep)
		if err != nil {
			return nil, err
		}
		if added {
			li.add(q, dropped)
			learned = append(learned, t)
		}
	}
	s.learnedChanged(ctx, learned...)
	return learned, nil
}

// OnLearned calls fn with the tools whose learned queries this instance
// changed (learned or forgot), so the other instances can sync them
// (SyncLearned). Set before serving.
func (s *Selector) OnLearned(fn func(ctx context.Context, tools []string)) { s.onLearned = fn }

func (s *Selector) learnedChanged(ctx context.Context, tools ...string) {
	if s.onLearned != nil && len(tools) > 0 {
		s.onLearned(ctx, tools)
	}
}

// SyncLearnedLater runs SyncLearned for each tool in the selector's
// background (waited for by Close), logging what fails.
func (s *Selector) SyncLearnedLater(tools []string) {
	s.goJob(func() {
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
		defer cancel()
		for _, tool := range tools {
			if err := s.SyncLearned(ctx, tool); err != nil && ctx.Err() == nil {
				s.log.Warn("sync learned queries", "tool", tool, "err", err)
			}
		}
	})
}

// SyncLearned reads tool's learned queries from the store again, after
// another instance learned or forgot some: the rankings here use them at
// once, where they waited for the next start.
func (s *Selector) SyncLearned(ctx context.Context, tool string) error {
	s.mu.Lock() // as a refresh, which loads them the first time
	defer s.mu.Unlock()
	if !s.loaded {
		return nil // the first refresh loads every tool's
	}
	qs, err := s.store.LearnedQueries(ctx, tool)
	if err != nil {
		return err
	}
	s.learned.Load().sync(tool, qs)
	return nil
}

// LearnedQueries lists what a tool was learned from, newest first.
func (s *Selector) LearnedQueries(ctx context.Context, tool string) ([]models.LearnedQuery, error) {
	if err := tooldef.CheckName(tool); err != nil {
		return nil, err
	}
	if _, _, err := s.store.ToolByName(ctx, tool, true); err != nil {
		return nil, err
	}
	return s.store.LearnedQueries(ctx, tool)
}

// ForgetQuery removes one learned query of a tool.
func (s *Selector) ForgetQuery(ctx context.Context, tool string, id uint) error {
	if err := tooldef.CheckName(tool); err != nil {
		return err
	}
	if err := s.store.DeleteLearnedQuery(ctx, tool, id); err != nil {
		return err
	}
	s.learned.Load().remove([]uint{id})
	s.learnedChanged(ctx, tool)
	return nil
}

// Suggest returns the real tools closest to a name that does not exist: a
// widened search (top 40) on the session's last query, merged with the
// tools whose names are most alike. An LLM that invented a tool name can
// retry with one of these.
func (s *Selector) Suggest(ctx context.Context, caller *models.Principal, sessionID, name string, max int) ([]string, error) {
	if err := s.ensureFresh(ctx); err != nil {
		return nil, err
	}
	vis, err := s.visibilityOf(caller)
	if err != nil {
		return nil, err
	}
	ix := s.idx.Load()
	allowed := scope{vis: vis}
	score := map[int]float64{}
	if sessionID != "" {
		if sel, err := s.recorder.lastOf(ctx, sessionID, time.Now().UTC()); err == nil {
			for r, hit := range s.rank(ctx, ix, task{focus: sel.Query}, allowed, 40) {
				score[hit.entry] += 1.0 / float64(10+r)
			}
		}
	}
	// The invented name is a small query too: "read_file" finds file_read.
	// Only tools a selection would return count: a name of words the
	// catalog does not hold ("../etc/passwd") is no evidence, though the
	// word vectors find every tool a little like it.
	for r, hit := range s.rank(ctx, ix, task{focus: strings.Join(embed.Words(name), " ")}, allowed, 40) {
		if hit.score >= DefaultMinScore {
			score[hit.entry] += 0.5 / float64(10+r)
		}
	}
	for i, e := range ix.entries {
		if !e.runnable || !vis.allows(e) {
			continue
		}
		if sim := nameSimilarity(name, e.name); sim > 0.5 {
			score[i] += sim * 0.2
		}
	}
	order := make([]int, 0, len(score))
	for i := range score {
		order = append(order, i)
	}
	sort.Slice(order, func(a, b int) bool {
		if score[order[a]] != score[order[b]] {
			return score[order[a]] > score[order[b]]
		}
		return ix.entries[order[a]].name < ix.entries[order[b]].name
	})
	out := []string{}
	for _, i := range order[:min(max, len(order))] {
		out = append(out, ix.entries[i].name)
	}
	return out, nil
}

// UnknownToolError is a tool name that does not exist, with the real tools
// closest to it. It matches models.ErrNotFound.
type UnknownToolError struct {
	Name        string
	Suggestions []string
}

func (e *UnknownToolError) Error() string {
	msg := fmt.Sprintf("tool %q does not exist", e.Name)
	if len(e.Suggestions) > 0 {
		msg += "; did you mean " + strings.Join(e.Suggestions, ", ") + "?"
	}
	return msg
}

// Is makes errors.Is(err, models.ErrNotFound) true.
func (e *UnknownToolError) Is(target error) bool { return target == models.ErrNotFound }

// ExplainUnknown turns a not-found error for a tool that was never
// registered into an UnknownToolError with suggestions; other errors (a
// retired tool, a bad name) pass unchanged.
func (s *Selector) ExplainUnknown(ctx context.Context, caller *models.Principal, sessionID, name string, err error) error {
	if !errors.Is(err, models.ErrNotFound) || !tooldef.NamePattern.MatchString(name) {
		return err
	}
	if _, _, lookErr := s.store.ToolByName(ctx, name, true); lookErr == nil || !errors.Is(lookErr, models.ErrNotFound) {
		return err
	}
	sug, sErr := s.Suggest(ctx, caller, sessionID, name, 5)
	if sErr != nil {
		return err
	}
	return &UnknownToolError{Name: name, Suggestions: sug}
}

// nameSimilarity is 1 minus the normalized Levenshtein distance of two
// names, after sorting their words so "read_file" is close to "file_read".
func nameSimilarity(a, b string) float64 {
	norm := func(s string) string {
		w := embed.Words(s)
		slices.Sort(w)
		return strings.Join(w, " ")
	}
	a, b = norm(a), norm(b)
	if a == "" || b == "" {
		return 0
	}
	d := levenshtein.ComputeDistance(a, b)
	return 1 - float64(d)/float64(max(utf8.RuneCountInString(a), utf8.RuneCountInString(b)))
}

func toSet(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// timedEmbedder reports each embedding request's latency and errors.
type timedEmbedder struct {
	embed.Embedder
	m *ops.Metrics
}

func (t timedEmbedder) Embed(ctx context.Context, kind embed.Kind, texts []string) ([][]float32, error) {
	start := time.Now()
	vecs, err := t.Embedder.Embed(ctx, kind, texts)
	t.m.Embedded(time.Since(start), err)
	return vecs, err
}

// WithMetrics makes the selector report selection and embedding latency
// to m. Call it before the selector is used.
func (s *Selector) WithMetrics(m *ops.Metrics) *Selector {
	s.metrics = m
	s.emb = timedEmbedder{Embedder: s.emb, m: m}
	return s
}
