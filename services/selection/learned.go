package selection

import (
	"math"
	"slices"
	"sync"

	"toolbelt/models"
	"toolbelt/services/embed"
)

// learnedIndex holds the queries learned from usage: BM25 postings over
// each query (a query is a document pointing at its tool) and, per tool,
// the centroid of the queries' vectors. Learning happens on every call or
// feedback, so it is updated in place under a lock instead of rebuilt;
// dropped queries are tombstoned and compacted once they pile up.
type learnedIndex struct {
	mu       sync.RWMutex
	model    string
	tok      *embed.Tokenizer
	postings map[string][]posting
	lengths  []float32
	liveLen  float64
	live     int
	docs     []learnedDoc
	byID     map[uint]int
	byTool   map[string][]int     // tool → its documents, dead ones included
	sums     map[string][]float32 // tool → sum of its query vectors
	counts   map[string]int       // tool → queries holding a vector
}

type learnedDoc struct {
	id    uint
	tool  string
	query string
	terms []string
	vec   []float32
	dead  bool
}

func newLearnedIndex(model string, tok *embed.Tokenizer, qs []models.LearnedQuery) *learnedIndex {
	li := &learnedIndex{model: model, tok: tok}
	li.reset()
	// Oldest first, so document order is learning order.
	for i := len(qs) - 1; i >= 0; i-- {
		li.addLocked(qs[i])
	}
	return li
}

func (li *learnedIndex) reset() {
	li.postings = map[string][]posting{}
	li.lengths, li.docs = nil, nil
	li.liveLen, li.live = 0, 0
	li.byID = map[uint]int{}
	li.byTool = map[string][]int{}
	li.sums, li.counts = map[string][]float32{}, map[string]int{}
}

// add records a learned query and forgets the dropped ones.
func (li *learnedIndex) add(q models.LearnedQuery, dropped []uint) {
	li.mu.Lock()
	defer li.mu.Unlock()
	li.addLocked(q)
	li.removeLocked(dropped)
}

// remove forgets learned queries by id.
func (li *learnedIndex) remove(ids []uint) {
	li.mu.Lock()
	defer li.mu.Unlock()
	li.removeLocked(ids)
}

// sync makes tool's queries those of qs (its rows in the store, newest
// first): the ones missing are added, the ones gone forgotten. Another
// instance learned or forgot them (Selector.SyncLearned).
func (li *learnedIndex) sync(tool string, qs []models.LearnedQuery) {
	li.mu.Lock()
	defer li.mu.Unlock()
	keep := map[uint]bool{}
	for _, q := range qs {
		keep[q.ID] = true
	}
	var gone []uint
	for _, n := range li.byTool[tool] {
		if d := li.docs[n]; !d.dead && !keep[d.id] {
			gone = append(gone, d.id)
		}
	}
	li.removeLocked(gone)
	for i := len(qs) - 1; i >= 0; i-- {
		li.addLocked(qs[i])
	}
}

func (li *learnedIndex) addLocked(q models.LearnedQuery) {
	if _, ok := li.byID[q.ID]; ok {
		return
	}
	d := learnedDoc{id: q.ID, tool: q.ToolName, query: q.Query, terms: li.tok.Terms(q.Query)}
	if q.Model == li.model && len(q.Vector) > 0 {
		d.vec = decodeVector(q.Vector)
	}
	li.insert(d)
}

// insert appends a document to the postings and its tool's centroid sum.
func (li *learnedIndex) insert(d learnedDoc) {
	n := int32(len(li.docs))
	tf := map[string]float32{}
	for _, t := range d.terms {
		tf[t]++
	}
	for t, c := range tf {
		li.postings[t] = append(li.postings[t], posting{doc: n, tf: c})
	}
	li.docs = append(li.docs, d)
	li.lengths = append(li.lengths, float32(len(d.terms)))
	li.liveLen += float64(len(d.terms))
	li.live++
	li.byID[d.id] = int(n)
	li.byTool[d.tool] = append(li.byTool[d.tool], int(n))
	if d.vec == nil {
		return
	}
	sum := li.sums[d.tool]
	if sum == nil {
		sum = make([]float32, len(d.vec))
		li.sums[d.tool] = sum
	}
	if len(sum) == len(d.vec) {
		for i, x := range d.vec {
			sum[i] += x
		}
		li.counts[d.tool]++
	}
}

func (li *learnedIndex) removeLocked(ids []uint) {
	for _, id := range ids {
		n, ok := li.byID[id]
		if !ok {
			continue
		}
		d := &li.docs[n]
		d.dead = true
		delete(li.byID, id)
		li.live--
		li.liveLen -= float64(len(d.terms))
		if sum := li.sums[d.tool]; d.vec != nil && len(sum) == len(d.vec) {
			for i, x := range d.vec {
				sum[i] -= x
			}
			li.counts[d.tool]--
		}
	}
	// Compact when a third of the documents are tombstones.
	if dead := len(li.docs) - li.live; dead > 64 && dead*3 > len(li.docs) {
		old := li.docs
		li.reset()
		for _, d := range old {
			if !d.dead {
				li.insert(d)
			}
		}
	}
}

// learnedScores is what learning says about each tool for one query.
type learnedScores struct {
	lexical map[string]float32 // best BM25 score of the tool's queries
	dense   map[string]float32 // similarity to the tool's centroid
}

// score ranks the learned queries for a query (BM25 over each learned
// query, the best per tool) and compares the query vector with each tool's
// centroid.
func (li *learnedIndex) score(terms []string, qvec []float32, par bm25Params) learnedScores {
	li.mu.RLock()
	defer li.mu.RUnlock()
	out := learnedScores{lexical: map[string]float32{}, dense: map[string]float32{}}
	if li.live == 0 {
		return out
	}
	avg := float32(li.liveLen / float64(li.live))
	n := float64(li.live)
	per := map[int32]float32{}
	var idfSum float32
	seen := map[string]bool{}
	for _, t := range terms {
		if seen[t] {
			continue
		}
		seen[t] = true
		ps := li.postings[t]
		if len(ps) == 0 {
			continue
		}
		df := 0
		for _, p := range ps {
			if !li.docs[p.doc].dead {
				df++
			}
		}
		if df == 0 {
			continue
		}
		idf := float32(math.Log(1 + (n-float64(df)+0.5)/(float64(df)+0.5)))
		idfSum += idf
		for _, p := range ps {
			if li.docs[p.doc].dead {
				continue
			}
			per[p.doc] += idf * par.weight(p.tf, li.lengths[p.doc], avg)
		}
	}
	// Scores are made absolute: a learned query holding every query term
	// once scores about the sum of their idf, so dividing by it puts a
	// near-paraphrase near 1 and a one-word overlap low, however few tools
	// have learned anything.
	for doc, sc := range per {
		tool := li.docs[doc].tool
		if v := min(sc/idfSum, 1); v > out.lexical[tool] {
			out.lexical[tool] = v
		}
	}
	if qvec != nil {
		for tool, sum := range li.sums {
			if li.counts[tool] > 0 && len(sum) == len(qvec) {
				out.dense[tool] = embed.Dot(qvec, sum) / float32(math.Sqrt(float64(embed.Dot(sum, sum))))
			}
		}
	}
	return out
}

// nearest returns, for each tool, the best cosine of qvec with one of
// its newest perTool learned queries: the nearest past task, where the
// centroid blurs a tool's several kinds of task into one.
func (li *learnedIndex) nearest(tools []string, qvec []float32, perTool int) []float32 {
	li.mu.RLock()
	defer li.mu.RUnlock()
	out := make([]float32, len(tools))
	for k, tool := range tools {
		docs := li.byTool[tool]
		seen := 0
		for j := len(docs) - 1; j >= 0 && seen < perTool; j-- {
			d := &li.docs[docs[j]]
			if d.dead || len(d.vec) != len(qvec) {
				continue
			}
			seen++
			out[k] = max(out[k], embed.Dot(qvec, d.vec))
		}
	}
	return out
}

// size is the number of live learned queries.
func (li *learnedIndex) size() int {
	li.mu.RLock()
	defer li.mu.RUnlock()
	return li.live
}

// knows reports whether a learned query holds term.
func (li *learnedIndex) knows(term string) bool {
	li.mu.RLock()
	defer li.mu.RUnlock()
	return len(li.postings[term]) > 0
}

// matching returns up to max learned queries of tool sharing terms with
// the query, most shared first. set holds the terms as a set, made at the
// first tool that has learned queries and kept for the next ones.
func (li *learnedIndex) matching(tool string, terms []string, set *map[string]bool, max int) []string {
	li.mu.RLock()
	defer li.mu.RUnlock()
	if len(li.byTool[tool]) == 0 {
		return nil
	}
	if *set == nil {
		*set = toSet(terms)
	}
	q := *set
	type hit struct {
		text string
		n    int
	}
	var hits []hit
	for _, n := range li.byTool[tool] {
		d := li.docs[n]
		if d.dead {
			continue
		}
		n := 0
		for _, t := range d.terms {
			if q[t] {
				n++
			}
		}
		if n > 0 {
			hits = append(hits, hit{d.query, n})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return b.n - a.n })
	var out []string
	for _, h := range hits[:min(max, len(hits))] {
		out = append(out, h.text)
	}
	return out
}
