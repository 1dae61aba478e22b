package selection

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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
	sb := newDenseIndex(vecs, 2, 0)
	ok := []bool{true, true, false, true}
	got := sb.denseCandidates([]float32{1, 0}, ok, 8, &binaryBuf{bin: make([]uint16, 4)}, nil)
	if len(got) != 1 || got[0] != 0 {
		t.Errorf("candidates %v, want [0]", got)
	}
}

// TestCentredIndex checks the centring of a model's vectors against the
// same arithmetic in float64: each tool's vector less the shrunk catalog
// mean, made unit length; and that a catalog of one tool keeps its
// vector (the shrinking), where a full centring would leave nothing.
func TestCentredIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const dim, n, prior = 64, 40, 32
	shared := make([]float64, dim)
	for d := range shared {
		shared[d] = r.NormFloat64()
	}
	unit := func(v []float64) []float64 {
		var ss float64
		for _, x := range v {
			ss += x * x
		}
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = x / math.Sqrt(ss)
		}
		return out
	}
	f32 := func(v []float64) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	}
	// Tools that share a direction, as a model's descriptions do.
	vecs := make([]qvec, n)
	for i := range vecs {
		v := make([]float64, dim)
		for d := range v {
			v[d] = 2*shared[d] + r.NormFloat64()
		}
		vecs[i] = quantise(f32(unit(v)))
	}
	mean := make([]float64, dim)
	for _, q := range vecs {
		for d, c := range q.codes {
			mean[d] += float64(c) * float64(q.scale) / (n + prior)
		}
	}
	raw, centred := newDenseIndex(vecs, dim, 0), newDenseIndex(vecs, dim, prior)
	var rawSpread, centredSpread [2]float32 // least and most similarity
	rawSpread[0], centredSpread[0] = 2, 2
	for range 50 {
		qv := make([]float64, dim)
		for d := range qv {
			qv[d] = shared[d] + r.NormFloat64()
		}
		q := f32(unit(qv))
		for i, tv := range vecs {
			want := make([]float64, dim)
			for d, c := range tv.codes {
				want[d] = float64(c)*float64(tv.scale) - mean[d]
			}
			var dot float64
			for d, x := range unit(want) {
				dot += x * float64(q[d])
			}
			got := centred.similarity(int32(i), q)
			if math.Abs(float64(got)-dot) > 0.01 || math.IsNaN(float64(got)) {
				t.Fatalf("tool %d: centred similarity %.4f, float64 %.4f", i, got, dot)
			}
			s := raw.similarity(int32(i), q)
			rawSpread = [2]float32{min(rawSpread[0], s), max(rawSpread[1], s)}
			centredSpread = [2]float32{min(centredSpread[0], got), max(centredSpread[1], got)}
		}
	}
	// What centring is for: the shared direction no longer bunches the
	// similarities together.
	if centredSpread[1]-centredSpread[0] <= 1.15*(rawSpread[1]-rawSpread[0]) {
		t.Errorf("similarities span %v centred, %v raw: want a wider span centred", centredSpread, rawSpread)
	}

	one := []qvec{quantise(f32(unit(shared)))}
	single := newDenseIndex(one, dim, prior)
	if got := single.similarity(0, f32(unit(shared))); got < 0.99 {
		t.Errorf("one tool's similarity to its own vector %.4f after centring, want about 1", got)
	}
	if !slices.Equal(raw.codes[:dim], vecs[0].codes) {
		t.Error("prior 0 changed the codes")
	}
}

// BenchmarkPackDense times packing 100,000 vectors of 512 dimensions
// (a real model's catalog) into an index, raw and centred: what an index
// rebuild spends on the dense side.
func BenchmarkPackDense(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	vecs := make([]qvec, 100_000)
	v := make([]float32, 512)
	for i := range vecs {
		for d := range v {
			v[d] = float32(r.NormFloat64()) / 22
		}
		vecs[i] = quantise(v)
	}
	for _, prior := range []float64{0, 32} {
		b.Run(fmt.Sprintf("prior=%g", prior), func(b *testing.B) {
			for b.Loop() {
				_ = newDenseIndex(vecs, 512, prior)
			}
		})
	}
}
