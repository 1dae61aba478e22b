package embed

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
)

// HashDim is the dimension of the built-in embedder's hashed features.
const HashDim = 256

// Builtin is the embedder that needs no service. Its vectors join two
// parts:
//
//   - feature hashing of stemmed words, adjacent word pairs and the
//     character n-grams of each word into HashDim signed dimensions:
//     lexical and sub-word likeness (plurals, typos, names written as one
//     word such as "airqualityforecast");
//   - the mean of the text's static word vectors (WordVectors): some of
//     a real model's sense of meaning ("condo" and "apartment"), for the
//     words the table holds.
//
// The word part has wordShare of the squared length, so a cosine is
// (1-wordShare) × the hashed one + wordShare × the words' one, less when
// the table lacks some of the text's words. Learning from usage and
// lexical ranking do the rest.
//
// Any change to how features are made must change Model, so that stored
// vectors are re-embedded.
type Builtin struct {
	tok   *Tokenizer
	words *WordVectors // nil: hashed features only
}

// wordShare is the word vectors' share of a built-in vector, swept on the
// MetaTool dev split (docs/benchmarks.md#tuning).
const wordShare = 0.7

// NewBuiltin returns the built-in embedder, with the word table built
// into the binary.
func NewBuiltin() *Builtin { return &Builtin{tok: NewTokenizer(), words: builtinWords()} }

// Model names the algorithm, its version and the word table's digest.
func (b *Builtin) Model() string {
	if b.words == nil {
		return fmt.Sprintf("builtin/hash-v1-%d", HashDim)
	}
	return fmt.Sprintf("builtin/hash-v1-%d+words-v1-%d-%s", HashDim, b.words.dim, b.words.id)
}

// Embed turns each text into a unit vector. Queries and documents are
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
	v := make([]float32, HashDim)
	var sem []float32   // the sum of the word vectors
	var seen, found int // words, and those the table holds
	if b.words != nil {
		sem = make([]float32, b.words.dim)
	}
	counts := map[string]float64{}
	var prev string
	for _, w := range Words(text) {
		if IsStopWord(w) || (len(w) < 2 && (w[0] < '0' || w[0] > '9')) {
			prev = ""
			continue
		}
		s := b.tok.Stem(w)
		if sem != nil {
			seen++
			if i, ok := b.words.row(w, s); ok {
				b.words.add(sem, i)
				found++
			}
		}
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
		idx := sum % HashDim
		if sum>>63 == 1 {
			wgt = -wgt
		}
		v[idx] += wgt
	}
	Normalize(v)
	if sem == nil {
		return v
	}
	// Both parts unit length, then weighted, the word part by the share
	// of the words the table holds too: one known word among noise does
	// not bring its whole meaning, and a text none of whose words the
	// table holds keeps its hashed part alone, at full length.
	Normalize(sem)
	a, c := float32(math.Sqrt(1-wordShare)), float32(math.Sqrt(wordShare))
	if seen > 0 {
		c *= float32(found) / float32(seen)
	}
	for i := range v {
		v[i] *= a
	}
	for i := range sem {
		sem[i] *= c
	}
	return Normalize(append(v, sem...))
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

// Dim is the vector dimension: HashDim and the word vectors'.
func (b *Builtin) Dim() int {
	if b.words == nil {
		return HashDim
	}
	return HashDim + b.words.dim
}
