package embed

import (
	lru "github.com/hashicorp/golang-lru/v2"
)

// DefaultQueryCacheSize is how many query vectors a QueryCache keeps when
// asked for none: about 6 MB at 768 dimensions, and enough for the tasks an
// agent fleet repeats (the same task re-selected, suggestions and learning
// embedding a selection's query again).
const DefaultQueryCacheSize = 2048

// QueryCache keeps the vectors of recent queries by model and text, so a
// repeated task does not pay the model again. It is bounded (least
// recently used first out) and safe for concurrent use. The vectors it
// returns are shared: callers must not change them.
type QueryCache struct {
	c *lru.Cache[queryKey, []float32]
}

// queryKey names a query vector: the same text under another model is
// another vector.
type queryKey struct{ model, text string }

// NewQueryCache returns a cache of up to size vectors
// (DefaultQueryCacheSize when size < 1).
func NewQueryCache(size int) *QueryCache {
	if size < 1 {
		size = DefaultQueryCacheSize
	}
	c, _ := lru.New[queryKey, []float32](size) // fails only for a size below 1
	return &QueryCache{c: c}
}

// Get returns the vector of text under model, if it is cached.
func (q *QueryCache) Get(model, text string) ([]float32, bool) {
	return q.c.Get(queryKey{model, text})
}

// Add caches the vector of text under model.
func (q *QueryCache) Add(model, text string, vec []float32) {
	q.c.Add(queryKey{model, text}, vec)
}

// Len is how many vectors are cached.
func (q *QueryCache) Len() int { return q.c.Len() }
