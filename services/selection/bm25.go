package selection

import (
	"math"
	"slices"
)

// bm25 is an inverted index scored with Okapi BM25, the standard lexical
// ranking. Documents are numbered 0..n-1 by the caller.
type bm25 struct {
	postings map[string][]posting
	lengths  []float32
	avgLen   float32
}

type posting struct {
	doc int32
	tf  float32
	// w is the document's BM25 term weight without the idf, computed
	// once at build: tf (k1+1) / (tf + k1 (1 - b + b len/avglen)).
	w float32
}

// bm25Params are BM25's term-frequency saturation k1 and length
// normalisation b.
type bm25Params struct{ k1, b float32 }

// weight is BM25's term weight without the idf for a term seen tf times
// in a document of length n, in a collection of average length avg.
func (p bm25Params) weight(tf, n, avg float32) float32 {
	return tf * (p.k1 + 1) / (tf + p.k1*(1-p.b+p.b*n/avg))
}

// newBM25 indexes docs, each given as its terms.
func newBM25(docs [][]string, par bm25Params) *bm25 {
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
	for _, ps := range ix.postings {
		for k := range ps {
			p := &ps[k]
			p.w = par.weight(p.tf, ix.lengths[p.doc], ix.avgLen)
		}
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
// (len(out) == number of documents, zero where a document is not in hits)
// and appends to hits the documents it scores first. Repeated query terms
// count once.
func (ix *bm25) score(query []string, out []float32, hits []int32) []int32 {
	return ix.scoreWeighted(query, nil, 1, out, hits)
}

// scoreWeighted is score with each term's weight multiplied by weight,
// for the terms not in skip: the context of a task, whose focus (skip)
// counted in full.
func (ix *bm25) scoreWeighted(terms, skip []string, weight float32, out []float32, hits []int32) []int32 {
	if len(terms) == 0 || ix.avgLen == 0 {
		return hits
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
			if out[p.doc] == 0 {
				hits = append(hits, p.doc)
			}
			out[p.doc] += idf * p.w
		}
	}
	return hits
}

// scoreSkipping is score for the documents not in skip (postings of
// another index over the same documents, in document order, as all
// postings are).
func (ix *bm25) scoreSkipping(terms []string, skip []posting, out []float32, hits []int32) []int32 {
	if len(terms) == 0 || ix.avgLen == 0 {
		return hits
	}
	for _, t := range distinct(terms) {
		idf := ix.idf(t)
		k := 0
		for _, p := range ix.postings[t] {
			for k < len(skip) && skip[k].doc < p.doc {
				k++
			}
			if k < len(skip) && skip[k].doc == p.doc {
				continue
			}
			if out[p.doc] == 0 {
				hits = append(hits, p.doc)
			}
			out[p.doc] += idf * p.w
		}
	}
	return hits
}

// full is the BM25 score that counts as a full lexical match for a query:
// the sum of its distinct terms' idf, so a tool holding every query term
// the catalog knows once (at average length) scores about 1 of it.
func (ix *bm25) full(query []string) float32 {
	var sum float32
	for _, t := range distinct(query) {
		sum += ix.idf(t)
	}
	return sum
}

// coverage is the share of the query's terms that the catalog or
// learning knows (known reports a term learning holds): 1 for a query of
// known words, 0 for "xyzzy qwerty", 1/4 for "xyzzy qwerty plugh shell". It
// scales a selection's reported scores.
func (ix *bm25) coverage(query []string, known func(string) bool) float64 {
	var have, all float64
	for _, t := range distinct(query) {
		all++
		if len(ix.postings[t]) > 0 || known(t) {
			have++
		}
	}
	if all == 0 {
		return 0
	}
	return have / all
}

func distinct(terms []string) []string {
	var out []string
	for _, t := range terms {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}
