package selection

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"

	"toolbelt/services/embed"
	"toolbelt/services/tooldef"
)

// rankText scores the allowed entries for one text (a task, or one of its
// intents) and returns the best limit of them.
//
// Signals: cosine similarity of the query vector with the tools' vectors
// (the best tuning.modelDenseTop or builtinDenseTop enter the fusion), BM25 over the tools'
// retrieval text and over their names' character 4-grams, and what was
// learned from usage (BM25 over learned queries, the best per tool; the
// similarity to their centroid; and, for the tools leading after those,
// the similarity to their nearest learned query). Each signal is scaled
// by what counts as full evidence for any query — cosine as it is, BM25
// by the sum of the query terms' idf, the learned ones by
// tuning.learnedFull, the nearest query from tuning.nearFloor to 1 — and
// the weighted sum ranks the tools; calibrated turns it into the score.
//
// Nothing here passes over the whole catalog but two cheap loops (the
// filter, and the dense ranking's binary pass over packed codes): the
// dense similarity is computed for the DenseCandidates best binary scores,
// BM25 walks the query terms' postings, and fusion, top-k and the reasons'
// ranks run over the tools some signal found.
func (s *Selector) rankText(ctx context.Context, ix *index, t task, in scope, limit int) []rankedTool {
	n := len(ix.entries)
	if n == 0 {
		return nil
	}
	terms := s.tok.Terms(t.focus)
	qvec := s.embedQuery(ctx, t.focus)
	// A task's context weighs contextWeight of its focus, in both signals
	// (task.go).
	var contextTerms []string
	if t.context != "" {
		contextTerms = s.tok.Terms(t.context)
		if qvec != nil {
			qvec = mixVectors(qvec, s.embedQuery(ctx, t.context), contextWeight)
		}
	}
	sc := getScratch(n)
	defer sc.release()
	ok := sc.ok
	in.fill(ix, ok)
	if qvec != nil {
		sc.cands = ix.vecs.denseCandidates(qvec, ok, ix.keep, &sc.binary, sc.cands)
		sc.dense = slices.Grow(sc.dense[:0], len(sc.cands))[:len(sc.cands)]
		ix.vecs.rescore(qvec, sc.cands, sc.dense)
	}
	sc.lexHits = ix.lex.score(terms, sc.lex, sc.lexHits)
	sc.lexHits = ix.lex.scoreWeighted(contextTerms, terms, contextWeight, sc.lex, sc.lexHits)
	sc.lexHits = keepAllowed(sc.lexHits, ok, sc.lex)
	li := s.learning.queries.Load()
	ls := li.score(terms, qvec, s.cfg.tune.learnedBM25)
	// A query word nobody knows is no evidence, and the score says so
	// (coverage). Under the built-in embedder every signal counts words,
	// so coverage counts in full. A real model reads words the catalog
	// does not hold ("fetch" for "retrieve"), but it also finds some
	// likeness in anything ("xyzzy qwerty" has a cosine of 0.3 to some
	// tool, as many real tasks do), so unknown words take only
	// tuning.modelCoverage of its score away. Coverage scales every tool
	// alike: it moves scores, not the ranking.
	cov, share := 1.0, s.cfg.tune.modelCoverage
	if s.cfg.local {
		share = 1
	}
	if share > 0 {
		c := ix.lex.coverage(terms, func(t string) bool { return li.knows(t) || ix.namesHold(t) })
		cov = 1 - share + share*c // exactly c when share is 1
	}
	for tool, v := range ls.lexical {
		if i, found := ix.byName[tool]; found && ok[i] && v > 0 {
			sc.learnLex[i] = v
			sc.learnLexHits = append(sc.learnLexHits, int32(i))
		}
	}
	// A centroid's cosine counts above what any past task has by chance.
	floor := s.cfg.tune.learnedFloor
	for tool, v := range ls.dense {
		v = (v - floor) / (1 - floor)
		if i, found := ix.byName[tool]; found && ok[i] && v > 0 {
			sc.learnDense[i] = v
			sc.learnDenseHits = append(sc.learnDenseHits, int32(i))
		}
	}
	weight, top, _ := s.denseTuning()
	sc.combineTop(sc.cands, sc.dense, weight, top, 1) // cosine
	sc.combine(sc.lexHits, sc.lex, s.cfg.tune.lexical, ix.lex.full(terms))
	sc.combine(sc.learnLexHits, sc.learnLex, s.cfg.tune.learnedLexical, s.cfg.tune.learnedFull)
	sc.combine(sc.learnDenseHits, sc.learnDense, s.cfg.tune.learnedDense, s.cfg.tune.learnedFull)
	if ix.names != nil {
		// The names' character 4-grams, for each query word, of the tools
		// whose text lacks the word: names are often words run together
		// or cut short ("airqualityforeast", "strology_tool"), and a word
		// the text holds counted already.
		var all []string
		for _, w := range distinct(embed.Words(t.focus)) {
			if embed.IsStopWord(w) || len(w) < 2 {
				continue
			}
			grams := nameGrams(w)
			all = append(all, grams...)
			sc.nameHits = ix.names.scoreSkipping(grams, ix.lex.postings[s.tok.Stem(w)], sc.name, sc.nameHits)
		}
		sc.nameHits = keepAllowed(sc.nameHits, ok, sc.name)
		sc.combine(sc.nameHits, sc.name, s.cfg.tune.nameGrams, ix.names.full(all))
	}
	if s.cfg.tune.learnedNear > 0 && !s.cfg.local && qvec != nil && li.size() > 0 {
		// The nearest past task of each tool leading so far: a centroid
		// blurs a tool's several kinds of task into one. Not under the
		// built-in embedder, whose vectors re-count the words learned
		// BM25 counts (docs/benchmarks.md#tuning).
		pool := topK(sc.hits, sc.fused, s.cfg.tune.nearPool)
		names := make([]string, len(pool))
		for k, i := range pool {
			names[k] = ix.entries[i].name
		}
		for k, v := range li.nearest(names, qvec, s.cfg.tune.nearPerTool) {
			if v > s.cfg.tune.nearFloor {
				i := pool[k]
				sc.learnNear[i] = (v - s.cfg.tune.nearFloor) / (1 - s.cfg.tune.nearFloor)
				sc.learnNearHits = append(sc.learnNearHits, i)
			}
		}
		sc.combine(sc.learnNearHits, sc.learnNear, s.cfg.tune.learnedNear, 1)
	}

	order := topK(sc.hits, sc.fused, limit)
	// Only the tools scoring in.minScore or more are shown; the others
	// get their score, which says the best one, and no reasons.
	out := make([]rankedTool, len(order))
	var shown []int32
	for k, i := range order {
		out[k] = rankedTool{entry: int(i), score: calibrated(sc.fused[i] * cov)}
		if out[k].score >= in.minScore {
			shown = append(shown, i)
		}
	}
	atDense, atLex := make([]float32, len(shown)), make([]float32, len(shown))
	for p, i := range shown {
		atDense[p], atLex[p] = sc.denseOf(i), sc.lex[i]
	}
	sc.lexVals = sc.lexVals[:0]
	for _, i := range sc.lexHits {
		sc.lexVals = append(sc.lexVals, sc.lex[i])
	}
	denseRanks, lexRanks := ranksAmong(sc.dense, atDense), ranksAmong(sc.lexVals, atLex)
	words := queryWords(s.tok, t.focus)
	var querySet map[string]bool // the query's terms, for the learned queries that match
	p := 0
	for k, i := range order {
		if out[k].score < in.minScore {
			continue
		}
		e := ix.entries[i]
		sim := sc.denseOf(i)
		if sim == 0 && qvec != nil && ix.vecs.has[i] && len(qvec) == ix.vecs.dim {
			sim = ix.vecs.similarity(i, qvec) // not a dense candidate: its similarity still explains it
		}
		out[k].reasons = Reasons{
			DenseSimilarity: round(float64(sim), 4), DenseRank: denseRanks[p],
			LexicalScore: round(float64(sc.lex[i]), 3), LexicalRank: lexRanks[p],
			MatchedTerms:   words.matched(e.doc.terms),
			LearnedQueries: li.matching(e.name, terms, &querySet, 3),
		}
		p++
	}
	return out
}

// scope is which tools a ranking may return: those this host can run
// that the caller's visibility allows, within the request's categories
// (include: only these, when any; exclude: none of these). Those scoring
// less than minScore are returned without reasons: a selection drops
// them.
type scope struct {
	vis              visibility
	include, exclude map[string]bool
	minScore         float64
}

// fill sets ok[i] to whether entry i is in scope: by category for the
// whole catalog, then by name for the safe tools an agent holds, so the
// pass over the catalog reads two bytes an entry and no entry.
func (in scope) fill(ix *index, ok []bool) {
	within := func(category string) bool {
		return (len(in.include) == 0 || in.include[category]) && !in.exclude[category]
	}
	unlisted := uint8(len(tooldef.Categories))
	byCat := make([]bool, unlisted)
	for id, c := range tooldef.Categories {
		byCat[id] = (in.vis.all || in.vis.categories[c]) && within(c)
	}
	for i, c := range ix.cat {
		if c == unlisted { // a category registration no longer accepts: read the entry
			e := ix.entries[i]
			ok[i] = e.runnable && in.vis.allows(e) && within(e.category)
			continue
		}
		ok[i] = ix.runnable[i] && byCat[c]
	}
	if in.vis.all {
		return
	}
	for name := range in.vis.tools {
		if i, found := ix.byName[name]; found {
			e := ix.entries[i]
			ok[i] = ok[i] || e.runnable && e.level == tooldef.LevelSafe && within(e.category)
		}
	}
}

// categoryID is category's place in tooldef.Categories, or one past the
// end for a category it does not list.
func categoryID(category string) uint8 {
	for id, c := range tooldef.Categories {
		if c == category {
			return uint8(id)
		}
	}
	return uint8(len(tooldef.Categories))
}

// scratch holds one ranking's per-tool buffers and the lists of tools
// each signal found; pooled, since a ranking of 100,000 tools would
// otherwise allocate megabytes each time. The per-tool arrays are zero
// between rankings: release clears only what the lists name.
type scratch struct {
	ok                                         []bool
	lex, learnLex, learnDense, learnNear, name []float32
	fused                                      []float64
	binary                                     binaryBuf
	// cands are the dense candidates, lexHits the tools BM25 scored,
	// nameHits those the names' 4-grams scored, learn*Hits the tools
	// learning scored, hits the tools fused.
	cands, lexHits, learnLexHits, learnDenseHits, learnNearHits, nameHits, hits []int32
	// dense is the candidates' similarity in their order (dense[k] is
	// cands[k]'s), not by tool: the passes after the rescoring (the
	// top-40 cut, the fusion, the ranks) read them in a row, where a
	// per-tool array spread them over the catalog, and there is nothing
	// to clear. lexVals is the same for lexHits, for their ranks.
	dense, lexVals []float32
}

// denseOf is tool i's similarity if it is a dense candidate, else 0
// (cands are in catalog order).
func (sc *scratch) denseOf(i int32) float32 {
	if k, found := slices.BinarySearch(sc.cands, i); found {
		return sc.dense[k]
	}
	return 0
}

var scratchPool sync.Pool

func getScratch(n int) *scratch {
	sc, _ := scratchPool.Get().(*scratch)
	if sc == nil || cap(sc.ok) < n {
		return &scratch{ok: make([]bool, n), lex: make([]float32, n),
			learnLex: make([]float32, n), learnDense: make([]float32, n), learnNear: make([]float32, n), name: make([]float32, n),
			fused: make([]float64, n), binary: binaryBuf{bin: make([]uint16, n)}}
	}
	sc.ok, sc.fused, sc.binary.bin = sc.ok[:n], sc.fused[:n], sc.binary.bin[:n]
	sc.lex, sc.learnLex, sc.learnDense, sc.learnNear = sc.lex[:n], sc.learnLex[:n], sc.learnDense[:n], sc.learnNear[:n]
	sc.name = sc.name[:n]
	return sc
}

// release zeroes what the ranking wrote and returns sc to the pool.
func (sc *scratch) release() {
	zero := func(list []int32, xs []float32) {
		for _, i := range list {
			xs[i] = 0
		}
	}
	zero(sc.lexHits, sc.lex)
	zero(sc.learnLexHits, sc.learnLex)
	zero(sc.learnDenseHits, sc.learnDense)
	zero(sc.learnNearHits, sc.learnNear)
	zero(sc.nameHits, sc.name)
	for _, i := range sc.hits {
		sc.fused[i] = 0
	}
	sc.cands, sc.lexHits, sc.learnLexHits, sc.learnDenseHits, sc.hits = sc.cands[:0], sc.lexHits[:0], sc.learnLexHits[:0], sc.learnDenseHits[:0], sc.hits[:0]
	sc.learnNearHits, sc.nameHits = sc.learnNearHits[:0], sc.nameHits[:0]
	sc.dense, sc.lexVals = sc.dense[:0], sc.lexVals[:0]
	scratchPool.Put(sc)
}

// keepAllowed drops the tools the filter refuses from list, in place, and
// zeroes their scores: release clears only what the lists name, and a
// score left behind would keep that tool out of the next ranking's list
// (a caller allowed the tool would not see it matched).
func keepAllowed(list []int32, ok []bool, scores []float32) []int32 {
	out := list[:0]
	for _, i := range list {
		if ok[i] {
			out = append(out, i)
		} else {
			scores[i] = 0
		}
	}
	return out
}

// combine adds weight × min(score/full, 1) into fused for the listed
// tools with a positive score; tools fused for the first time join hits.
// full is the score that counts as full evidence, the same for every
// query, so fused scores compare across queries.
func (sc *scratch) combine(list []int32, scores []float32, weight float64, full float32) {
	if full <= 0 || weight <= 0 {
		// Nothing to add; a tool joined hits here with its fused score
		// still 0 would join again with the next signal.
		return
	}
	for _, i := range list {
		if s := scores[i]; s > 0 {
			sc.add(i, weight*float64(min(s/full, 1)))
		}
	}
}

// combineTop is combine for the top best of the listed tools (all with
// a positive score when top is 0, and those tied with the top-th too),
// their scores given in the list's order: vals[k] is list[k]'s.
func (sc *scratch) combineTop(list []int32, vals []float32, weight float64, top int, full float32) {
	if full <= 0 || weight <= 0 {
		return
	}
	cut := float32(0)
	if top > 0 {
		cut = kthLargest(vals, top)
	}
	for k, i := range list {
		if s := vals[k]; s > 0 && s >= cut {
			sc.add(i, weight*float64(min(s/full, 1)))
		}
	}
}

// add adds x to tool i's fused score, listing i in hits the first time.
func (sc *scratch) add(i int32, x float64) {
	if sc.fused[i] == 0 {
		sc.hits = append(sc.hits, i)
	}
	sc.fused[i] += x
}

// kthLargest returns the k-th largest positive score (0 when there are
// fewer), with a small min-heap: one pass, no sort.
func kthLargest(scores []float32, k int) float32 {
	h := make([]float32, 0, k)
	for _, s := range scores {
		if s <= 0 {
			continue
		}
		if len(h) < k {
			h = append(h, s)
			for j := len(h) - 1; j > 0 && h[(j-1)/2] > h[j]; j = (j - 1) / 2 {
				h[j], h[(j-1)/2] = h[(j-1)/2], h[j]
			}
			continue
		}
		if s <= h[0] {
			continue
		}
		h[0] = s
		for j := 0; ; {
			l, r, m := 2*j+1, 2*j+2, j
			if l < k && h[l] < h[m] {
				m = l
			}
			if r < k && h[r] < h[m] {
				m = r
			}
			if m == j {
				break
			}
			h[j], h[m] = h[m], h[j]
			j = m
		}
	}
	if len(h) < k {
		return 0
	}
	return h[0]
}

// topK returns the k best positive fused scores among hits, best first
// (ties by index, so rankings are stable): an insertion into a list of at
// most k, so no sort of every tool found.
func topK(hits []int32, fused []float64, k int) []int32 {
	better := func(a, b int32) bool {
		if fused[a] != fused[b] {
			return fused[a] > fused[b]
		}
		return a < b
	}
	top := make([]int32, 0, k+1)
	for _, i := range hits {
		if fused[i] <= 0 || len(top) == k && !better(i, top[k-1]) {
			continue
		}
		j := len(top)
		top = append(top, i)
		for ; j > 0 && better(i, top[j-1]); j-- {
			top[j] = top[j-1]
		}
		top[j] = i
		top = top[:min(len(top), k)]
	}
	return top
}

// ranksAmong is, for each score of at, its 1-based rank among listed
// (1 + the listed scores above it), or 0 when it is not positive: one
// pass over listed, each score counted against at's (a pass per score of
// at would read the thousands of dense candidates a large catalog keeps
// once per returned tool).
func ranksAmong(listed, at []float32) []int {
	// by holds at's positions, best score first, and top their scores;
	// above[p] counts the listed scores above top[p] and below top[p-1].
	by := make([]int, len(at))
	for p := range by {
		by[p] = p
	}
	slices.SortFunc(by, func(a, b int) int { return cmp.Compare(at[b], at[a]) })
	top := make([]float32, len(at))
	for p, q := range by {
		top[p] = at[q]
	}
	above := make([]int, len(at)+1)
	// A listed score at or below every positive one of at's is above none
	// that gets a rank: skipped with one comparison (most of the dense
	// candidates, when the tools returned lead the dense ranking).
	floor := float32(math.Inf(1))
	for _, s := range at {
		if s > 0 {
			floor = min(floor, s)
		}
	}
	for _, s := range listed {
		if s <= floor {
			continue
		}
		// p is the first position whose score is below s (as cmp.Compare
		// orders them: NaN below every number): every score from there on
		// has s above it. A binary search without branches (the halving
		// is the same whatever the scores), where one that branches
		// mispredicts at each step.
		p := len(top)
		if s == s {
			p = 0
			for n := len(top); n > 1; {
				half := n / 2
				p += half * b2i(top[p+half] >= s)
				n -= half
			}
			p += b2i(top[p] >= s)
		}
		above[p]++
	}
	ranks := make([]int, len(at))
	n := 0
	for p, q := range by {
		n += above[p]
		if at[q] > 0 {
			ranks[q] = n + 1
		}
	}
	return ranks
}

// calibrated maps the fused evidence (a weighted sum of signals in [0, 1],
// times the query's coverage) to the score a selection reports,
// 1 − e^−evidence: in [0, 1), the same scale for every query and
// order-preserving. A tool holding every query word once (evidence 1)
// scores 0.63, one with a past task phrased the same (3 and more) 0.95 and
// above, a faint sub-word likeness 0.02 or less.
func calibrated(evidence float64) float64 {
	return 1 - math.Exp(-evidence)
}

// namesHold reports whether the names hold most of a term's 4-grams
// ("explor" in "stellarexplorer"): the term is evidence, not an unknown
// word.
func (ix *index) namesHold(term string) bool {
	if ix.names == nil {
		return false
	}
	grams := nameGrams(term)
	held := 0
	for _, g := range grams {
		if len(ix.names.postings[g]) > 0 {
			held++
		}
	}
	return 2*held >= len(grams)
}

// nameGrams are the character 4-grams of text's words that are not stop
// words, each word in boundary marks ("<str", "stro", …, "ogy>"): what
// BM25 over the tools' names indexes, so "astrology" meets
// "strology_tool" and "keyword" meets "keywordexplorer".
func nameGrams(text string) []string {
	var out []string
	for _, w := range embed.Words(text) {
		if embed.IsStopWord(w) || len(w) < 2 {
			continue
		}
		r := []rune("<" + w + ">")
		for i := 0; i+4 <= len(r); i++ {
			out = append(out, string(r[i:i+4]))
		}
		if len(r) < 4 {
			out = append(out, string(r))
		}
	}
	return out
}

// rankedTool is one tool in a ranking.
type rankedTool struct {
	entry   int
	score   float64
	reasons Reasons
	// intent is 1 + the place of the task's intent the tool answers
	// best, 0 when it answers the task as a whole (merge.go).
	intent int
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
