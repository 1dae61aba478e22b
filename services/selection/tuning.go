package selection

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
	// the least of the values swept that keeps gibberish under
	// GoodMatchScore, while few real tasks fall there
	// (docs/benchmarks.md#tuning).
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
	// intentFloor is the score a tool needs in the ranking of one of a
	// task's intents to take a place of its own in the selection
	// (merge.go), swept on Seal-Tools dev with MetaTool dev and BFCL
	// held to their figures (docs/benchmarks.md#tasks-of-several-intents-seal-tools).
	intentFloor float64
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
		nameRepeat: 1, intentFloor: 0.4,
	}
}

func (s *Selector) denseTuning() (weight float64, top int, centre float64) {
	if s.cfg.local {
		return s.cfg.tune.builtinDense, s.cfg.tune.builtinDenseTop, s.cfg.tune.builtinCentre
	}
	return s.cfg.tune.modelDense, s.cfg.tune.modelDenseTop, s.cfg.tune.modelCentre
}
