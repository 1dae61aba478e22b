package embed

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// TestWordTable checks the table built into the binary: its size, that
// words and the stems of forms it lacks are found, and that it reads as
// the generator says (every row at most its rarity weight long).
func TestWordTable(t *testing.T) {
	w := builtinWords()
	if w.Dim() != 64 || w.Len() < 70000 {
		t.Fatalf("%d words of %d dimensions; want over 70,000 of 64", w.Len(), w.Dim())
	}
	tok := NewTokenizer()
	for _, word := range []string{"condo", "apartment", "weather", "forecast", "retrieve", "invoice"} {
		if _, ok := w.row(word, tok.Stem(word)); !ok {
			t.Errorf("%q is not in the table", word)
		}
	}
	// "forecasting" is reached through its stem if the lists lack it.
	if _, ok := w.row("forecastings", tok.Stem("forecastings")); !ok {
		t.Error(`"forecastings" is not found by its stem`)
	}
	for _, word := range []string{"the", "xyzzy", "qwrtzx"} { // a stop word, gibberish
		if _, ok := w.row(word, tok.Stem(word)); ok {
			t.Errorf("%q is in the table", word)
		}
	}
	longest := 0.0
	for i := range w.Len() {
		var s float64
		for _, x := range w.rows[i*w.dim : (i+1)*w.dim] {
			s += float64(x) * float64(x)
		}
		longest = max(longest, math.Sqrt(s)*float64(w.scale))
	}
	// The weights reach ln 60 / ln 35 = 1.15; quantisation adds a little.
	if longest > 1.2 || longest < 1 {
		t.Errorf("the longest row is %.3f; want the rarest words' weight, 1.15", longest)
	}
}

// newHashing returns the built-in embedder without word vectors: what it
// was before them, for comparisons.
func newHashing() *Builtin { return &Builtin{tok: NewTokenizer()} }

// TestBuiltinMeaning checks what the word vectors add: words that share
// no letters but a meaning come near, unrelated ones stay apart, and a
// text without a word the table knows keeps its hashed part alone.
func TestBuiltinMeaning(t *testing.T) {
	ctx := context.Background()
	cos := func(b *Builtin, x, y string) float32 {
		v, err := b.Embed(ctx, Query, []string{x, y})
		if err != nil {
			t.Fatal(err)
		}
		return Dot(v[0], v[1])
	}
	b, hash := NewBuiltin(), newHashing()
	for _, tc := range []struct{ a, near, far string }{
		{"condo", "apartment", "weather"},
		{"buy a house", "purchase a home", "translate a sentence"},
		{"what will the weather be tomorrow", "rain forecast", "stock price"},
		{"send an email", "mail a message", "resize an image"},
	} {
		near, far := cos(b, tc.a, tc.near), cos(b, tc.a, tc.far)
		if near < far+0.1 {
			t.Errorf("cos(%q, %q) %.3f, cos(%q, %q) %.3f: want the first clearly higher", tc.a, tc.near, near, tc.a, tc.far, far)
		}
		// Hashing alone sees no likeness where no stem or n-gram is
		// shared: the likeness is the words'.
		if h := cos(hash, tc.a, tc.near); h > near/2 {
			t.Errorf("hashing alone gives %q and %q %.3f, the word vectors %.3f", tc.a, tc.near, h, near)
		}
	}
	// Gibberish has no word vector: the vector is the hashed one.
	got, _ := b.Embed(ctx, Query, []string{"xyzzy plugh"})
	want, _ := hash.Embed(ctx, Query, []string{"xyzzy plugh"})
	if len(got[0]) != HashDim+64 {
		t.Fatalf("dimension %d, want %d", len(got[0]), HashDim+64)
	}
	for i, x := range got[0] {
		if i < HashDim && math.Abs(float64(x-want[0][i])) > 1e-6 || i >= HashDim && x != 0 {
			t.Fatalf("component %d is %g; want the hashed vector and zeros", i, x)
		}
	}
	// The word part speaks for the words it knows: one known word of
	// three gives a third of the weight one of one does.
	part := func(text string) float64 {
		v, _ := b.Embed(ctx, Query, []string{text})
		var s, h float64
		for i, x := range v[0] {
			if i < HashDim {
				h += float64(x) * float64(x)
			} else {
				s += float64(x) * float64(x)
			}
		}
		return math.Sqrt(s / h) // word part against hashed part
	}
	one, third := part("shell"), part("xyzzy plugh shell")
	if r := third / one; math.Abs(r-1.0/3) > 0.01 {
		t.Errorf("the word part of one known word in three is %.3f of one in one; want 1/3", r)
	}
	if m := b.Model(); !strings.HasPrefix(m, "builtin/hash-v1-256+words-v1-64-") || len(m) != len("builtin/hash-v1-256+words-v1-64-")+8 {
		t.Errorf("model %q; want the table's digest in it", m)
	}
	if b.Dim() != HashDim+64 || hash.Dim() != HashDim || hash.Model() != "builtin/hash-v1-256" {
		t.Errorf("dimensions %d and %d, hashing model %q", b.Dim(), hash.Dim(), hash.Model())
	}
}

// table writes a word table as cmd/wordvecgen does, for the parser's
// tests: keys as given (in order), rows of dim components.
func table(rows, dim int, scale float32, keys []string, keyRows []uint32, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString(wordMagic)
	_ = binary.Write(&b, binary.LittleEndian, struct {
		Rows  uint32
		Dim   uint16
		Scale float32
		Keys  uint32
	}{uint32(rows), uint16(dim), scale, uint32(len(keys))})
	for i, k := range keys {
		b.WriteByte(byte(len(k)))
		b.WriteString(k)
		_ = binary.Write(&b, binary.LittleEndian, keyRows[i])
	}
	b.Write(data)
	return b.Bytes()
}

// TestParseWordVectors checks that a malformed table is refused with a
// reason, never read half-way, and a good one reads back.
func TestParseWordVectors(t *testing.T) {
	good := table(2, 3, 0.01, []string{"cat", "dog", "hous"}, []uint32{0, 1, 1}, []byte{1, 2, 3, 0xff, 0, 127})
	w, err := ParseWordVectors(good)
	if err != nil {
		t.Fatal(err)
	}
	if w.Len() != 2 || w.Dim() != 3 || w.keys["hous"] != 1 || w.rows[3] != -1 || w.rows[5] != 127 {
		t.Errorf("read %d rows of %d, keys %v, rows %v", w.Len(), w.Dim(), w.keys, w.rows)
	}
	const headLen = len(wordMagic) + 14
	manyKeys := table(2, 3, 0.01, nil, nil, make([]byte, 6))
	binary.LittleEndian.PutUint32(manyKeys[headLen-4:], 1000)
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "bad magic"},
		{"another file", []byte("\x89PNG\r\n\x1a\nrest"), "bad magic"},
		{"header cut", good[:12], "header"},
		{"no dimensions", table(2, 0, 0.01, nil, nil, nil), "0 dimensions"},
		{"scale NaN", table(2, 3, float32(math.NaN()), nil, nil, make([]byte, 6)), "scale"},
		{"scale negative", table(2, 3, -1, nil, nil, make([]byte, 6)), "scale"},
		{"more keys than bytes", manyKeys, "1000 keys in 6 bytes"},
		{"key cut", good[:headLen+3], "key 0: truncated"},
		{"key's row cut", good[:headLen+6], `key "cat": unexpected EOF`},
		{"keys out of order", table(2, 3, 0.01, []string{"dog", "cat"}, []uint32{0, 1}, make([]byte, 6)), "out of order"},
		{"key repeated", table(2, 3, 0.01, []string{"cat", "cat"}, []uint32{0, 1}, make([]byte, 6)), "out of order"},
		{"empty key", table(2, 3, 0.01, []string{""}, []uint32{0}, make([]byte, 6)), "empty"},
		{"row out of range", table(2, 3, 0.01, []string{"cat"}, []uint32{2}, make([]byte, 6)), "row 2 of 2"},
		{"rows cut", good[:len(good)-1], "want 2 rows"},
		{"rows too long", append(append([]byte{}, good...), 0), "want 2 rows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := ParseWordVectors(tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.want) || w != nil {
				t.Errorf("got %v, %v; want an error saying %q", w, err, tc.want)
			}
		})
	}
}

// BenchmarkReadWordTable is the one-time cost of the first embedding:
// the shipped table decompressed and parsed.
func BenchmarkReadWordTable(b *testing.B) {
	for b.Loop() {
		if _, err := ReadWordTable(bytes.NewReader(wordvecGz)); err != nil {
			b.Fatal(err)
		}
	}
}
