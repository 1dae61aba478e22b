package selection

import "math"

// bm25 is an inverted index scored with Okapi BM25 (k1 1.2, b 0.75), the
// standard lexical ranking. Documents are numbered 0..n-1 by the caller.
type bm25 struct {
	postings map[string][]posting
	lengths  []float32
	avgLen   float32
}

type posting struct {
	doc int32
	tf  float32
}

const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// newBM25 indexes docs, each given as its terms.
func newBM25(docs [][]string) *bm25 {
	ix := &bm25{postings: map[string][]posting{}, lengths: make([]float32, len(docs))}
	var total float32
	for d, terms := range docs {
		tf := map[string]float32{}
		for _, t := range terms {
			tf[t]++
		}
		for t, n := range tf {
			ix.postings[t] = append(ix.postings[t], posting{doc: int32(d), tf: n})
		}
		ix.lengths[d] = float32(len(terms))
		total += float32(len(terms))
	}
	if len(docs) > 0 {
		ix.avgLen = total / float32(len(docs))
	}
	return ix
}

// idf is BM25's inverse document frequency, never negative.
func (ix *bm25) idf(term string) float32 {
	n := float64(len(ix.lengths))
	df := float64(len(ix.postings[term]))
	if df == 0 {
		return 0
	}
	return float32(math.Log(1 + (n-df+0.5)/(df+0.5)))
}

// score adds each document's BM25 score for the query terms into out
// (len(out) == number of documents). Repeated query terms count once.
func (ix *bm25) score(query []string, out []float32) {
	ix.scoreWeighted(query, nil, 1, out)
}

// scoreWeighted adds weight × each document's BM25 score for the terms
// not in skip (the focus, which counted in full) into out: the context
// of a task.
func (ix *bm25) scoreWeighted(terms, skip []string, weight float32, out []float32) {
	if len(terms) == 0 || ix.avgLen == 0 {
		return
	}
	seen := make(map[string]bool, len(skip))
	for _, t := range skip {
		seen[t] = true
	}
	for _, t := range terms {
		if seen[t] {
			continue
		}
		seen[t] = true
		ps := ix.postings[t]
		if len(ps) == 0 {
			continue
		}
		idf := weight * ix.idf(t)
		for _, p := range ps {
			norm := bm25K1 * (1 - bm25B + bm25B*ix.lengths[p.doc]/ix.avgLen)
			out[p.doc] += idf * p.tf * (bm25K1 + 1) / (p.tf + norm)
		}
	}
}
