package embed

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed" // the word table
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sync"
)

// WordVectors is a static table of word vectors: each English word's
// vector is what a real sentence model (USE-lite) gives the word alone,
// reduced by PCA to a few dimensions and weighted by how rare the word is.
// The built-in embedder adds the mean of a text's word vectors to its
// hashed features, so "condo" lands near "apartment" with no service. This
// is how static embeddings distil a model (as Model2Vec does): the
// meaning the model gives each word, without the model.
//
// cmd/wordvecgen makes the table (wordvec.bin.gz) from the SCOWL word
// lists and the model; wordvec.NOTICE holds both licences.
type WordVectors struct {
	dim   int
	scale float32          // of the int8 components
	rows  []int8           // one row of dim components per word
	keys  map[string]int32 // words and their stems → row
	id    string           // a digest of the table, for Model
}

// The table is embedded gzip-compressed (4.5 of its 6.1 MB): it is read
// once, on the first embedding.
//
//go:embed wordvec.bin.gz
var wordvecGz []byte

// wordMagic opens a table file; the 1 is its format's version.
const wordMagic = "TBWORDS1"

var builtinWords = sync.OnceValue(func() *WordVectors {
	w, err := ReadWordTable(bytes.NewReader(wordvecGz))
	if err != nil {
		panic("embed: the built-in word table: " + err.Error()) // the build embeds a broken file
	}
	return w
})

// ReadWordTable reads a gzip-compressed table, as wordvec.bin.gz holds it.
func ReadWordTable(r io.Reader) (*WordVectors, error) {
	z, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("not a gzip-compressed word table: %w", err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		return nil, fmt.Errorf("not a gzip-compressed word table: %w", err)
	}
	return ParseWordVectors(b)
}

// WriteWordTable writes table compressed as ReadWordTable reads it: the
// same table gives the same bytes (no name or time in the header).
func WriteWordTable(w io.Writer, table []byte) error {
	z, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := z.Write(table); err != nil {
		return err
	}
	return z.Close()
}

// ParseWordVectors reads a table in the format cmd/wordvecgen writes
// (all numbers little-endian):
//
//	"TBWORDS1"  rows uint32  dim uint16  scale float32  keys uint32
//	keys × (len uint8, the key's bytes, row uint32), in ascending order
//	rows × dim int8
func ParseWordVectors(b []byte) (*WordVectors, error) {
	r := bytes.NewReader(b)
	magic := make([]byte, len(wordMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != wordMagic {
		return nil, errors.New("not a word table (bad magic)")
	}
	var head struct {
		Rows  uint32
		Dim   uint16
		Scale float32
		Keys  uint32
	}
	if err := binary.Read(r, binary.LittleEndian, &head); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if head.Dim == 0 || head.Rows == 0 || !(head.Scale > 0) || math.IsInf(float64(head.Scale), 0) {
		return nil, fmt.Errorf("header: %d rows of %d dimensions at scale %g", head.Rows, head.Dim, head.Scale)
	}
	if int64(head.Keys) > int64(r.Len()) {
		return nil, fmt.Errorf("header: %d keys in %d bytes", head.Keys, r.Len())
	}
	w := &WordVectors{dim: int(head.Dim), scale: head.Scale, keys: make(map[string]int32, head.Keys)}
	var prev string
	for i := range head.Keys {
		n, err := r.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		key := make([]byte, n)
		var row uint32
		if _, err := io.ReadFull(r, key); err != nil {
			return nil, fmt.Errorf("key %d: truncated", i)
		}
		if err := binary.Read(r, binary.LittleEndian, &row); err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		if string(key) <= prev && i > 0 || n == 0 {
			return nil, fmt.Errorf("key %q: empty, repeated or out of order", key)
		}
		if row >= head.Rows {
			return nil, fmt.Errorf("key %q: row %d of %d", key, row, head.Rows)
		}
		prev = string(key)
		w.keys[prev] = int32(row)
	}
	if want := int(head.Rows) * int(head.Dim); r.Len() != want {
		return nil, fmt.Errorf("rows: %d bytes, want %d rows × %d", r.Len(), head.Rows, head.Dim)
	}
	rest := b[len(b)-r.Len():]
	w.rows = make([]int8, len(rest))
	for i, c := range rest {
		w.rows[i] = int8(c)
	}
	sum := sha256.Sum256(b)
	w.id = hex.EncodeToString(sum[:4])
	return w, nil
}

// Dim is the dimension of the word vectors.
func (w *WordVectors) Dim() int { return w.dim }

// Len is the number of words (rows) in the table.
func (w *WordVectors) Len() int { return len(w.rows) / w.dim }

// Scale is the step of the int8 components.
func (w *WordVectors) Scale() float64 { return float64(w.scale) }

// Rows returns every row, dequantised.
func (w *WordVectors) Rows() [][]float64 {
	out := make([][]float64, w.Len())
	for i := range out {
		out[i] = make([]float64, w.dim)
		for k, x := range w.rows[i*w.dim : (i+1)*w.dim] {
			out[i][k] = float64(x) * float64(w.scale)
		}
	}
	return out
}

// Keys returns the words and stems the table finds, in order.
func (w *WordVectors) Keys() []string { return slices.Sorted(maps.Keys(w.keys)) }

// Lookup returns the row of a word, or failing that of a stem.
func (w *WordVectors) Lookup(word, stem string) (int, bool) {
	i, ok := w.row(word, stem)
	return int(i), ok
}

// row finds a word, or failing that its stem.
func (w *WordVectors) row(word, stem string) (int32, bool) {
	if i, ok := w.keys[word]; ok {
		return i, true
	}
	i, ok := w.keys[stem]
	return i, ok
}

// add adds row i to sum (in units of scale).
func (w *WordVectors) add(sum []float32, i int32) {
	row := w.rows[int(i)*w.dim : int(i+1)*w.dim]
	sum = sum[:len(row)]
	for k, x := range row {
		sum[k] += float32(x)
	}
}
