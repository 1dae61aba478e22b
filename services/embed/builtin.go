package embed

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
)

// BuiltinDim is the dimension of the built-in embedder's vectors.
const BuiltinDim = 256

// Builtin is the embedder that needs no service: feature hashing of
// stemmed words, adjacent word pairs and the character n-grams of each
// word into signed dimensions. It captures lexical and sub-word likeness
// (plurals, typos, names written as one word such as "airqualityforecast"),
// not meaning; learning from usage and lexical ranking do the rest.
//
// Any change to how features are made must change Model, so that stored
// vectors are re-embedded.
type Builtin struct {
	tok *Tokenizer
}

// NewBuiltin returns the built-in embedder.
func NewBuiltin() *Builtin { return &Builtin{tok: NewTokenizer()} }

// Model names the algorithm and its version.
func (*Builtin) Model() string { return fmt.Sprintf("builtin/hash-v1-%d", BuiltinDim) }

// Embed hashes each text into a unit vector. Queries and documents are
// treated alike.
func (b *Builtin) Embed(ctx context.Context, _ Kind, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		out[i] = b.vector(t)
	}
	return out, nil
}

// Feature weights: whole words carry most of the signal, word pairs some
// phrase order, and n-grams the sub-word likeness.
const (
	wordWeight  = 1.0
	pairWeight  = 0.5
	ngramWeight = 0.6
)

func (b *Builtin) vector(text string) []float32 {
	v := make([]float32, BuiltinDim)
	counts := map[string]float64{}
	var prev string
	for _, w := range Words(text) {
		if IsStopWord(w) || (len(w) < 2 && (w[0] < '0' || w[0] > '9')) {
			prev = ""
			continue
		}
		s := b.tok.Stem(w)
		counts["w:"+s] += wordWeight
		if prev != "" {
			counts["p:"+prev+" "+s] += pairWeight
		}
		prev = s
		grams := ngrams(w)
		per := ngramWeight / math.Sqrt(float64(len(grams)))
		for _, g := range grams {
			counts["g:"+g] += per
		}
	}
	for f, c := range counts {
		// Sublinear weight: a word said three times is not three times as
		// telling.
		wgt := float32(c)
		if c > 1 {
			wgt = float32(1 + 0.5*math.Log(c))
		}
		h := fnv.New64a()
		_, _ = h.Write([]byte(f))
		sum := h.Sum64()
		idx := sum % BuiltinDim
		if sum>>63 == 1 {
			wgt = -wgt
		}
		v[idx] += wgt
	}
	return Normalize(v)
}

// ngrams returns the character 3- to 5-grams of a word wrapped in boundary
// marks, so "papers" and "paper" share most of theirs.
func ngrams(w string) []string {
	r := []rune("<" + w + ">")
	var out []string
	for n := 3; n <= 5; n++ {
		for i := 0; i+n <= len(r); i++ {
			out = append(out, string(r[i:i+n]))
		}
	}
	if len(out) == 0 {
		out = append(out, string(r))
	}
	return out
}

// Dim is the vector dimension, BuiltinDim.
func (*Builtin) Dim() int { return BuiltinDim }
