// Package embed turns text into vectors for tool selection. Two embedders
// sit behind one interface: Ollama (a real embedding model served
// elsewhere) and a built-in one that needs no service.
package embed

import (
	"context"
	"math"
)

// Kind says what a text is, so models trained with task prefixes (such as
// nomic-embed-text's "search_query: " and "search_document: ") get them.
type Kind int

// The kinds of text embedded.
const (
	Document Kind = iota // a tool's retrieval text
	Query                // an agent's task
)

// Embedder turns texts into vectors of one fixed dimension.
type Embedder interface {
	// Model names the embedder and model, e.g. "ollama/nomic-embed-text";
	// stored vectors are keyed by it, so a different model re-embeds.
	Model() string
	// Embed returns one vector per text, in order, all of one dimension.
	Embed(ctx context.Context, kind Kind, texts []string) ([][]float32, error)
}

// Normalize scales v to unit length in place (a zero vector stays zero),
// so cosine similarity becomes a dot product.
func Normalize(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return v
	}
	inv := float32(1 / math.Sqrt(sum))
	for i := range v {
		v[i] *= inv
	}
	return v
}

// Dot returns the dot product of two vectors of equal length.
func Dot(a, b []float32) float32 {
	var s0, s1, s2, s3 float32
	n := len(a)
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}
