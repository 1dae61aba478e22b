package selection

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"toolbelt/models"
	"toolbelt/services/embed"
	"toolbelt/services/ops"
)

// queryEmbedding is the embedding of queries: vectors cached by model and
// text, and the back-off after the embedder fails.
type queryEmbedding struct {
	cache     *embed.QueryCache
	failUntil atomic.Int64 // unix nanoseconds; query embedding backs off until then
	fails     atomic.Int64 // query embedding failures in a row; 0 once the model answers
	lastErr   atomic.Value // string: the last query embedding error
}

// reembedProgress is the progress of a background re-embed of the
// catalog.
type reembedProgress struct {
	running atomic.Bool // a background re-embed runs, or is pending
	pending atomic.Bool // a re-embed waits for Run (or WaitEmbedded)
	done    atomic.Int64
	total   atomic.Int64
}

// EmbedFailing reports whether the last query embedding failed: from then
// until the model answers again, queries it has not embedded before rank
// lexically.
func (s *Selector) EmbedFailing() bool { return s.queryEmbed.fails.Load() > 0 }

// Embedded reports how many indexed tools have a vector under the current
// model, of how many, and whether a background re-embed is under way.
func (s *Selector) Embedded() (withVector, tools int, running bool) {
	running = s.reembed.running.Load()
	ix := s.catalog.snapshot.Load()
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
		if s.reembed.pending.Swap(false) {
			s.backgroundEmbed(ctx) // no Run to run it
		}
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

// embedJob is the texts that have no vector under the current model.
type embedJob struct {
	versionIDs []uint
	texts      []string
	learned    []models.LearnedQuery
}

func (j embedJob) size() int { return len(j.texts) + len(j.learned) }

// missing collects what needs embedding; s.catalog.mu is held.
func (s *Selector) missing(tools []models.ActiveTool, learned []models.LearnedQuery) embedJob {
	var j embedJob
	for _, t := range tools {
		// A version registered since the last refresh has no docInfo yet;
		// the next refresh picks it up.
		if d := s.catalog.docs[t.VersionID]; d != nil && d.vec.codes == nil {
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
			s.reembed.done.Add(int64(len(vecs)))
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
// them (index snapshots in use keep the old ones); s.catalog.mu is held.
func (s *Selector) applyJob(ctx context.Context, j embedJob, docs, queries [][]float32) error {
	model := s.emb.Model()
	rows := make([]models.ToolEmbedding, 0, len(docs))
	for i, v := range docs {
		old, ok := s.catalog.docs[j.versionIDs[i]]
		if !ok || old.text != j.texts[i] {
			continue // retired or changed while embedding
		}
		d := *old
		d.vec = quantise(v)
		s.catalog.docs[j.versionIDs[i]] = &d
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
func (s *Selector) backgroundEmbed(ctx context.Context) {
	defer s.reembed.running.Store(false)
	s.catalog.mu.Lock()
	tools, err := s.store.ActiveTools(ctx)
	var learned []models.LearnedQuery
	if err == nil {
		learned, err = s.store.LearnedQueries(ctx, "")
	}
	var job embedJob
	if err == nil {
		job = s.missing(tools, learned)
	}
	s.catalog.mu.Unlock()
	if err != nil {
		s.log.Error("re-embed: load catalog", "err", err)
		return
	}
	s.reembed.done.Store(0)
	s.reembed.total.Store(int64(job.size()))
	s.log.Info("re-embedding the catalog in the background", "model", s.emb.Model(), "texts", job.size())
	start := time.Now()
	docs, queries, err := s.embedJobTexts(ctx, job)
	if err == nil {
		s.catalog.mu.Lock()
		err = s.applyJob(ctx, job, docs, queries)
		s.catalog.mu.Unlock()
	}
	if err != nil {
		s.log.Error("re-embed failed; texts without vectors rank lexically", "err", err, "done", s.reembed.done.Load())
		return
	}
	s.log.Info("re-embedding finished", "texts", job.size(), "duration", time.Since(start).Round(time.Millisecond))
	s.reembed.running.Store(false)
	s.catalog.mu.Lock()
	s.learning.loaded = false // reload learned queries with their new vectors
	s.catalog.mu.Unlock()
	if err := s.Refresh(ctx); err != nil {
		s.log.Error("refresh after re-embed", "err", err)
	}
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
	if v, ok := s.queryEmbed.cache.Get(model, query); ok {
		return v
	}
	if until := s.queryEmbed.failUntil.Load(); until != 0 && time.Now().UnixNano() < until {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, queryEmbedTimeout)
	defer cancel()
	vecs, err := s.emb.Embed(ctx, embed.Query, []string{query})
	if !s.queryEmbedded(ctx, err, len(vecs), 1) {
		return nil
	}
	s.queryEmbed.cache.Add(model, query, vecs[0])
	return vecs[0]
}

// queryEmbedded notes how a request for want query vectors went: after a
// failure (an error, or got vectors for want texts) the selector ranks
// lexically for a while, longer after each failure in a row, and says so
// once; after a success it notes that the model answers again.
func (s *Selector) queryEmbedded(ctx context.Context, err error, got, want int) bool {
	if err != nil || got != want {
		if err == nil {
			err = fmt.Errorf("%d vectors for %d queries", got, want)
		}
		n := s.queryEmbed.fails.Add(1)
		wait := min(embedRetryMin<<min(n-1, 5), embedRetryMax)
		s.queryEmbed.failUntil.Store(time.Now().Add(wait).UnixNano())
		s.queryEmbed.lastErr.Store(err.Error())
		s.log.WarnContext(ctx, "embed query failed; ranking lexically", "err", err, "retry_in", wait)
		return false
	}
	if s.queryEmbed.fails.Swap(0) > 0 {
		s.log.InfoContext(ctx, "query embedding works again; dense ranking restored", "model", s.emb.Model())
	}
	s.queryEmbed.failUntil.Store(0)
	return true
}

// embedQueries embeds, in one request, the texts the query cache lacks
// (a task's focus and its intents), so that embedQuery then finds each in
// the cache; after a failure it ranks lexically as embedQuery would.
func (s *Selector) embedQueries(ctx context.Context, texts []string) {
	model := s.emb.Model()
	var missing []string
	for _, t := range texts {
		if _, ok := s.queryEmbed.cache.Get(model, t); !ok && !slices.Contains(missing, t) {
			missing = append(missing, t)
		}
	}
	if len(missing) < 2 {
		return
	}
	if until := s.queryEmbed.failUntil.Load(); until != 0 && time.Now().UnixNano() < until {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, queryEmbedTimeout)
	defer cancel()
	vecs, err := s.emb.Embed(ctx, embed.Query, missing)
	if !s.queryEmbedded(ctx, err, len(vecs), len(missing)) {
		return
	}
	for i, t := range missing {
		s.queryEmbed.cache.Add(model, t, vecs[i])
	}
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
