package selection

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"toolbelt/services/embed"
)

// TestQuantisedDot checks the int8 dot product against the float one, on
// random unit vectors and on the built-in embedder's own.
func TestQuantisedDot(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	unit := func(n int) []float32 {
		v := make([]float32, n)
		var ss float64
		for i := range v {
			v[i] = float32(r.NormFloat64())
			ss += float64(v[i] * v[i])
		}
		for i := range v {
			v[i] /= float32(math.Sqrt(ss))
		}
		return v
	}
	for range 500 {
		a, b := unit(256), unit(256)
		if got, want := quantise(b).dot(a), embed.Dot(a, b); math.Abs(float64(got-want)) > 0.01 {
			t.Fatalf("quantised dot %.4f, float %.4f", got, want)
		}
	}
	vecs, err := embed.NewBuiltin().Embed(context.Background(), embed.Document, SyntheticQueries(200, 9))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(vecs); i++ {
		if got, want := quantise(vecs[i]).dot(vecs[i-1]), embed.Dot(vecs[i-1], vecs[i]); math.Abs(float64(got-want)) > 0.01 {
			t.Fatalf("builtin vectors: quantised dot %.4f, float %.4f", got, want)
		}
	}
	if q := quantise(make([]float32, 8)); q.dot(make([]float32, 8)) != 0 {
		t.Error("zero vector")
	}
}

// TestApproximateRecall checks that the binary pass keeps what the exact
// scan selects: the selections of 20,000 synthetic tools agree on at
// least 99% of their tools.
func TestApproximateRecall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 20,000-tool index")
	}
	s := memSelector(t, 20_000)
	if r := recallVsExact(s, SyntheticQueries(200, 4), 15); r < 0.99 {
		t.Errorf("recall against the exact scan %.4f, want >= 0.99", r)
	}
}

// TestDenseCandidatesSmall checks that a catalog no larger than the
// candidate count is scanned exactly: every allowed tool with a vector.
func TestDenseCandidatesSmall(t *testing.T) {
	vecs := []qvec{quantise([]float32{1, 0}), {}, quantise([]float32{0, 1}), quantise([]float32{1, 1, 1})}
	sb := newDenseIndex(vecs, 2)
	ok := []bool{true, true, false, true}
	got := sb.denseCandidates([]float32{1, 0}, ok, 8, &binaryBuf{bin: make([]uint16, 4)}, nil)
	if len(got) != 1 || got[0] != 0 {
		t.Errorf("candidates %v, want [0]", got)
	}
}
