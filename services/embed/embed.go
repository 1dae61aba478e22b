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

// Dot returns the dot product of two vectors of equal length. It is the
// hot loop of dense ranking: eight independent sums let the CPU overlap the
// multiplications, and the slicing proves the bounds once.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		x, y := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += x[0] * y[0]
		s1 += x[1] * y[1]
		s2 += x[2] * y[2]
		s3 += x[3] * y[3]
		s4 += x[4] * y[4]
		s5 += x[5] * y[5]
		s6 += x[6] * y[6]
		s7 += x[7] * y[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3) + (s4 + s5) + (s6 + s7)
}
