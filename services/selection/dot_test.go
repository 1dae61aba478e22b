package selection

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// exactDot is the dot product in float64, the reference the sums are
// held to.
func exactDot(c []int8, q []float32) (dot, mag float64) {
	for i := range q {
		p := float64(q[i]) * float64(c[i])
		dot += p
		mag += math.Abs(p)
	}
	return dot, mag
}

// checkDot holds qvec.dot (the assembly where the CPU has AVX2) and dotGo
// to the float64 dot product, within float32 rounding of the products'
// magnitudes.
func checkDot(t *testing.T, c []int8, q []float32) {
	t.Helper()
	want, mag := exactDot(c, q)
	tol := 1e-5*mag + 1e-6
	if got := float64(dotGo(c, q)); math.Abs(got-want) > tol {
		t.Fatalf("dotGo over %d dimensions = %v, want %v", len(q), got, want)
	}
	if got := float64(qvec{codes: c, scale: 1}.dot(q)); math.Abs(got-want) > tol {
		t.Fatalf("dot over %d dimensions = %v, want %v (AVX2: %v)", len(q), got, want, haveAVX2)
	}
}

// Every length from 0 to 70 (the assembly's 32- and 8-wide steps and the
// Go tail), the index's sizes, and the extreme codes.
func TestDot(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range append([]int{256, 384, 512, 768, 1024}, func() (ns []int) {
		for n := range 71 {
			ns = append(ns, n)
		}
		return
	}()...) {
		c, q := make([]int8, n), make([]float32, n)
		for i := range n {
			c[i], q[i] = int8(r.IntN(256)-128), float32(r.NormFloat64())
		}
		checkDot(t, c, q)
		for i := range c { // the extremes of int8
			c[i] = 127
			if i%2 == 0 {
				c[i] = -128
			}
		}
		checkDot(t, c, q)
	}
}

// Arbitrary codes and queries, NaN and infinities aside.
func FuzzDot(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, int64(1))
	f.Add(make([]byte, 300), int64(7))
	f.Fuzz(func(t *testing.T, raw []byte, seed int64) {
		n := len(raw)
		c, q := make([]int8, n), make([]float32, n)
		r := rand.New(rand.NewPCG(uint64(seed), 9))
		for i, b := range raw {
			c[i] = int8(b)
			q[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(7)-3))) // 0.001 to 1000
		}
		checkDot(t, c, q)
	})
}

// BenchmarkDot is one rescoring dot product at 256 dimensions.
func BenchmarkDot(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	q := make([]float32, 256)
	for i := range q {
		q[i] = float32(r.NormFloat64())
	}
	v := quantise(q)
	b.Run("go", func(b *testing.B) {
		var s float32
		for b.Loop() {
			s += dotGo(v.codes, q)
		}
		_ = s
	})
	b.Run("dot", func(b *testing.B) {
		var s float32
		for b.Loop() {
			s += v.dot(q)
		}
		_ = s
	})
}

// scoreByMasks is the binary score's definition: per mask, the number of
// the query's dimensions in it whose sign the tool shares.
func scoreByMasks(p *queryPlanes, w []uint64) int {
	n := 0
	for j, x := range w {
		agree := ^(x ^ p.sign[j])
		for k := range p.masks {
			n += bits.OnesCount64(agree & p.masks[k][j])
		}
	}
	return n
}

// The binary score with the weights in binary, one tool at a time (score)
// and a run of tools in assembly (scores), equals its definition, for
// queries with zeros, ties and any dimension.
func FuzzBinaryScore(f *testing.F) {
	f.Add(int64(1), uint16(256), uint8(0))
	f.Add(int64(2), uint16(300), uint8(3))
	f.Add(int64(3), uint16(7), uint8(9))
	f.Fuzz(func(t *testing.T, seed int64, dim uint16, zeros uint8) {
		n := int(dim%1100) + 1
		r := rand.New(rand.NewPCG(uint64(seed), 5))
		q := make([]float32, n)
		for i := range q {
			switch r.IntN(10) {
			case 0:
				q[i] = float32(int(zeros) % 3) // ties and zeros
			default:
				q[i] = float32(r.NormFloat64())
			}
		}
		words := (n + 63) / 64
		p := newQueryPlanes(q, words)
		const tools = 20
		signs := make([]uint64, tools*words)
		for j := range signs {
			switch r.IntN(8) {
			case 0:
				signs[j] = 0
			case 1:
				signs[j] = ^uint64(0) // every sign agrees, or none
			default:
				signs[j] = r.Uint64()
			}
		}
		got := make([]uint16, tools)
		p.scores(signs, got)
		// Each kernel the CPU has, whichever scores chose.
		kernels := map[string][]uint16{"scores": got}
		if havePOPCNT {
			kernels["POPCNT"] = make([]uint16, tools)
			binaryScoresPOPCNT(&signs[0], tools, words, &p.words[0], &kernels["POPCNT"][0])
		}
		if haveAVX512POPCNT {
			kernels["AVX-512"] = make([]uint16, tools)
			binaryScoresAVX512(&signs[0], tools, words, &p.chunks[0], &kernels["AVX-512"][0])
		}
		for i := range tools {
			w := signs[i*words : (i+1)*words]
			want := scoreByMasks(&p, w)
			if s := p.score(w); s != want {
				t.Fatalf("score %d, by the masks %d (dim %d)", s, want, n)
			}
			for name, k := range kernels {
				if int(k[i]) != want {
					t.Fatalf("%s: tool %d scores %d, by the masks %d (dim %d)", name, i, k[i], want, n)
				}
			}
		}
	})
}

// BenchmarkBinaryScore is one tool's binary score at 256 dimensions, by
// the weights in binary (score) and by the four masks (its definition),
// and a run of tools' at 256 and 512 dimensions in Go and in each
// assembly kernel the CPU has (ns/tool).
func BenchmarkBinaryScore(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	q := make([]float32, 256)
	for i := range q {
		q[i] = float32(r.NormFloat64())
	}
	p := newQueryPlanes(q, 4)
	codes := make([]uint64, 4*1024)
	for i := range codes {
		codes[i] = r.Uint64()
	}
	for name, score := range map[string]func(*queryPlanes, []uint64) int{"score": (*queryPlanes).score, "masks": scoreByMasks} {
		b.Run(name, func(b *testing.B) {
			n, i := 0, 0
			for b.Loop() {
				n += score(&p, codes[i*4:i*4+4])
				i = (i + 1) & 1023
			}
			_ = n
		})
	}
	// The kernels score a run of 1,024 tools; ns/tool compares with score.
	for _, dim := range []int{256, 512} {
		words := dim / 64
		q := make([]float32, dim)
		for i := range q {
			q[i] = float32(r.NormFloat64())
		}
		p := newQueryPlanes(q, words)
		codes := make([]uint64, words*1024)
		for i := range codes {
			codes[i] = r.Uint64()
		}
		out := make([]uint16, 1024)
		kernels := map[string]func(){"go": func() {
			for i := range out {
				out[i] = uint16(p.score(codes[i*words : (i+1)*words]))
			}
		}}
		if havePOPCNT {
			kernels["popcnt"] = func() { binaryScoresPOPCNT(&codes[0], len(out), words, &p.words[0], &out[0]) }
		}
		if haveAVX512POPCNT {
			kernels["avx512"] = func() { binaryScoresAVX512(&codes[0], len(out), words, &p.chunks[0], &out[0]) }
		}
		for name, run := range kernels {
			b.Run(fmt.Sprintf("%s/%d", name, dim), func(b *testing.B) {
				for b.Loop() {
					run()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(out)), "ns/tool")
			})
		}
	}
}

// quartilesBySort is what newQueryPlanes took the cuts from before
// quartiles: the sorted magnitudes at a quarter, half and three quarters.
func quartilesBySort(xs []float32) (q1, q2, q3 float32) {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/4], s[len(s)/2], s[len(s)*3/4]
}

// FuzzQuartiles holds the selections to the sort, on any length, with
// ties, infinities and NaN.
func FuzzQuartiles(f *testing.F) {
	f.Add(int64(1), uint16(512), uint8(0))
	f.Add(int64(2), uint16(1), uint8(1))
	f.Add(int64(3), uint16(7), uint8(2))
	f.Add(int64(4), uint16(300), uint8(3))
	f.Fuzz(func(t *testing.T, seed int64, n uint16, kind uint8) {
		r := rand.New(rand.NewPCG(uint64(seed), 8))
		xs := make([]float32, int(n%2000)+1)
		for i := range xs {
			switch x := r.IntN(20); {
			case kind%4 == 1 && x < 10: // ties
				xs[i] = float32(r.IntN(3))
			case kind%4 == 2 && x < 2:
				xs[i] = float32(math.Inf(1))
			case kind%4 == 3 && x < 12: // NaN, even most of them
				xs[i] = float32(math.NaN())
			default:
				xs[i] = float32(math.Abs(r.NormFloat64()))
			}
		}
		w1, w2, w3 := quartilesBySort(xs)
		g1, g2, g3 := quartiles(slices.Clone(xs))
		same := func(a, b float32) bool { return a == b || a != a && b != b }
		if !same(g1, w1) || !same(g2, w2) || !same(g3, w3) {
			t.Fatalf("quartiles of %d values %v %v %v, by sorting %v %v %v", len(xs), g1, g2, g3, w1, w2, w3)
		}
	})
}

// BenchmarkQuartiles is the cuts of a 512-dimension query's planes, by
// selection and by the sort they replaced.
func BenchmarkQuartiles(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	q := make([]float32, 512)
	for i := range q {
		q[i] = float32(math.Abs(r.NormFloat64()))
	}
	buf := make([]float32, len(q))
	for name, cuts := range map[string]func([]float32) (float32, float32, float32){"select": quartiles, "sort": quartilesBySort} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				copy(buf, q)
				cuts(buf)
			}
		})
	}
}
