package selection

import (
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
)

// DenseCandidates is the least number of tools the binary pass of the
// dense ranking keeps for exact rescoring (docs/selection.md): in a
// catalog this size or smaller every tool is rescored, so the dense
// ranking is exact. Larger catalogs keep one tool in denseShare.
const DenseCandidates = 4096

// denseShare is the share of a large catalog the binary pass keeps, one
// in 12: a fixed number of candidates loses more of the exact scan's top
// tools as the catalog grows, where a share keeps that loss level; a
// larger share costs more in collecting and fusing candidates than it
// gains (BenchmarkRankRecall; docs/benchmarks.md#large-catalogs).
const denseShare = 12

// denseKeep is how many candidates the binary pass keeps in a catalog of
// n tools.
func denseKeep(n int) int { return max(DenseCandidates, n/denseShare) }

// qvec is a tool's vector quantised to int8 with one scale (x ≈ scale ×
// code): a quarter of float32's memory, and its dot product with a query
// within about 0.01 of the float one for unit vectors.
type qvec struct {
	codes []int8
	scale float32
}

// quantise maps v to int8 codes, the largest component to ±127.
func quantise(v []float32) qvec {
	if len(v) == 0 {
		return qvec{}
	}
	var m float32
	for _, x := range v {
		m = max(m, float32(math.Abs(float64(x))))
	}
	q := qvec{codes: make([]int8, len(v)), scale: m / 127}
	if m == 0 {
		return q
	}
	for i, x := range v {
		q.codes[i] = int8(math.Round(float64(x / q.scale)))
	}
	return q
}

// dot is the dot product of the float query with the quantised vector:
// with AVX2 eight dimensions an instruction (dot_amd64.s), the rest in
// Go. The rescoring runs it for every candidate, so the vector form is
// worth its assembly (BenchmarkDot compares the two).
func (q qvec) dot(query []float32) float32 {
	c := q.codes[:len(query)]
	i, s := 0, float32(0)
	if n := len(c) &^ 7; haveAVX2 && n > 0 {
		s = dotAVX2(&c[0], &query[0], n)
		i = n
	}
	return (s + dotGo(c[i:], query[i:])) * q.scale
}

// dotGo is the dot product of codes with query in Go, four sums at a time.
func dotGo(c []int8, query []float32) float32 {
	c = c[:len(query)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(c); i += 4 {
		x, y := query[i:i+4:i+4], c[i:i+4:i+4]
		s0 += x[0] * float32(y[0])
		s1 += x[1] * float32(y[1])
		s2 += x[2] * float32(y[2])
		s3 += x[3] * float32(y[3])
	}
	for ; i < len(c); i++ {
		s0 += query[i] * float32(c[i])
	}
	return s0 + s1 + s2 + s3
}

// denseIndex is the dense side of an index snapshot: every tool's binary
// code (bit d set when component d is positive) and its int8 codes, each
// kind in one array, so the binary pass reads 32 contiguous bytes a tool
// (256 dimensions) and the rescoring 256 more, with no pointer to follow
// per tool.
type denseIndex struct {
	words  int      // uint64s per tool
	signs  []uint64 // tool i's binary code is signs[i*words:(i+1)*words]
	codes  []int8   // tool i's int8 codes are codes[i*dim:(i+1)*dim]
	scales []float32
	has    []bool // tool i has a vector of the index's dimension
	dim    int
}

// newDenseIndex packs vecs; those not of dimension dim get none. With
// prior > 0 each vector is first moved away from the catalog's mean
// vector, shrunk by its size (centring, below), and made unit length
// again.
func newDenseIndex(vecs []qvec, dim int, prior float64) denseIndex {
	dx := denseIndex{words: (dim + 63) / 64, dim: dim, has: make([]bool, len(vecs)), scales: make([]float32, len(vecs))}
	dx.signs = make([]uint64, len(vecs)*dx.words)
	dx.codes = make([]int8, len(vecs)*dim)
	if dim == 0 {
		return dx
	}
	mean := centring(vecs, dim, prior)
	// Every CPU for a large catalog: centring reads and writes every
	// component of every vector (BenchmarkPackDense measures it).
	inParallel(len(vecs), partsOf(len(vecs)), func(_, lo, hi int) {
		v := make([]float32, dim)
		for i := lo; i < hi; i++ {
			q := vecs[i]
			if len(q.codes) != dim {
				continue
			}
			dx.has[i] = true
			codes := dx.codes[i*dim : (i+1)*dim]
			if mean != nil {
				q.scale = centred(q, mean, v, codes)
			} else {
				copy(codes, q.codes)
			}
			dx.scales[i] = q.scale
			w := dx.signs[i*dx.words : (i+1)*dx.words]
			for d, c := range codes {
				// Bit d is set when c > 0: -c's sign bit, with no branch
				// to mispredict on signs that are as good as random.
				w[d/64] |= uint64(-int64(c)) >> 63 << (d % 64)
			}
		}
	})
	return dx
}

// centred writes the int8 codes of q less mean, made unit length, into
// codes (v is scratch of the same length) and returns their scale: the
// largest component maps to ±127, as quantise does, in two passes with
// no per-component division.
func centred(q qvec, mean, v []float32, codes []int8) float32 {
	var norm float64
	var hi, lo float32
	for d, c := range q.codes {
		x := float32(c)*q.scale - mean[d]
		v[d] = x
		norm += float64(x) * float64(x)
		// Two rarely taken branches, where max(x, -x) costs a
		// mispredicted one a component.
		if x > hi {
			hi = x
		}
		if x < lo {
			lo = x
		}
	}
	most := max(hi, -lo)
	if most == 0 {
		clear(codes)
		return 0
	}
	k := 127 / most
	for d, x := range v {
		// Rounded half away from zero, as math.Round, without a branch:
		// ±0.5 with x's sign, then truncated.
		x *= k
		half := math.Float32frombits(0x3f000000 | math.Float32bits(x)&0x80000000)
		codes[d] = int8(int32(x + half))
	}
	return most / float32(math.Sqrt(norm)) / 127
}

// centring returns what to take from each vector of dimension dim: the
// mean of those vectors times n/(n+prior) for n of them, or nil when
// prior is 0 or no vector has the dimension. A model's vectors share a
// direction (every tool description reads like one), so cosines bunch
// together and the few words that tell tools apart weigh little; taking
// the shared part away spreads them (docs/benchmarks.md#tuning). The
// shrinking keeps a small catalog, whose mean is mostly its own few tools,
// close to the raw vectors: with one tool, centring would leave nothing.
func centring(vecs []qvec, dim int, prior float64) []float32 {
	if prior <= 0 || dim == 0 {
		return nil
	}
	sum := make([]float64, dim)
	n := 0
	for _, q := range vecs {
		if len(q.codes) != dim {
			continue
		}
		n++
		for d, c := range q.codes {
			sum[d] += float64(c) * float64(q.scale)
		}
	}
	if n == 0 {
		return nil
	}
	shrink := float64(n) / (float64(n) + prior) / float64(n)
	mean := make([]float32, dim)
	for d := range sum {
		mean[d] = float32(sum[d] * shrink)
	}
	return mean
}

// similarity is tool i's dot product with the query q (of the index's
// dimension), equal to its qvec's.
func (dx *denseIndex) similarity(i int32, q []float32) float32 {
	at := int(i) * dx.dim
	return qvec{codes: dx.codes[at : at+dx.dim : at+dx.dim], scale: dx.scales[i]}.dot(q)
}

// rescore sets out[k] to the similarity of list[k], in parallel when the
// list is long.
func (dx *denseIndex) rescore(q []float32, list []int32, out []float32) {
	const cost = 16 // a dot costs about 16 binary scores
	inParallel(len(list)*cost, partsOf(len(list)*cost), func(_, lo, hi int) {
		for k := lo / cost; k < min(hi/cost, len(list)); k++ {
			out[k] = dx.similarity(list[k], q)
		}
	})
}

// queryPlanes are the query's sign bits and four masks of its dimensions
// by magnitude (non-zero, and above the 25th, 50th and 75th percentile of
// the non-zero magnitudes): a tool's binary score is the number of
// agreeing signs counted in each mask, so large query components weigh up
// to four times the small ones — a cheap estimate of the dot product.
type queryPlanes struct {
	sign  []uint64
	masks [4][]uint64
	// words holds, per 64 dimensions, the sign bits and the weights
	// written in binary for score: a dimension's weight w (1 to 4: the
	// masks it is in) is nonzero + b0 + 2×b1, where b0 and b1 are the
	// bits of w-1. Three popcounts a word instead of four.
	words []planeWord
	// chunks holds the same planes for binaryScoresAVX512, eight words a
	// chunk: its sign bits, nonzero, b0 and b1, zero past the last word.
	// Only where the CPU has it.
	chunks []uint64
}

type planeWord struct{ sign, nonzero, b0, b1 uint64 }

func newQueryPlanes(q []float32, words int) queryPlanes {
	p := queryPlanes{sign: make([]uint64, words)}
	mags := make([]float32, 0, len(q))
	for _, x := range q {
		if x != 0 {
			mags = append(mags, float32(math.Abs(float64(x))))
		}
	}
	var cut [4]float32
	if len(mags) > 0 {
		cut[1], cut[2], cut[3] = quartiles(mags)
	}
	for k := range p.masks {
		p.masks[k] = make([]uint64, words)
	}
	for d, x := range q {
		if x > 0 {
			p.sign[d/64] |= 1 << (d % 64)
		}
		a := float32(math.Abs(float64(x)))
		for k := range p.masks {
			if x != 0 && a >= cut[k] {
				p.masks[k][d/64] |= 1 << (d % 64)
			}
		}
	}
	p.words = make([]planeWord, words)
	for j := range p.words {
		m1, m2, m3 := p.masks[1][j], p.masks[2][j], p.masks[3][j]
		// w-1 = m1+m2+m3 (nested masks: m3 ⊆ m2 ⊆ m1), in binary.
		p.words[j] = planeWord{sign: p.sign[j], nonzero: p.masks[0][j], b0: m1&^m2 | m3, b1: m2}
	}
	if haveAVX512POPCNT {
		p.chunks = make([]uint64, 32*((words+7)/8))
		for j, w := range p.words {
			c := p.chunks[32*(j/8)+j%8:]
			c[0], c[8], c[16], c[24] = w.sign, w.nonzero, w.b0, w.b1
		}
	}
	return p
}

// quartiles returns what slices.Sort would put at len/4, len/2 and
// 3·len/4 of xs (not empty), reordering it: three selections, which take
// linear time where a sort does not, on every query (BenchmarkQuartiles
// compares them). NaN sorts first, as there.
func quartiles(xs []float32) (q1, q2, q3 float32) {
	n := len(xs)
	nan := 0
	for i, x := range xs {
		if x != x {
			xs[i], xs[nan] = xs[nan], xs[i]
			nan++
		}
	}
	rest := xs[nan:]
	// r1, r2 and r3 are the places in rest; before it, NaN.
	r1, r2, r3 := n/4-nan, n/2-nan, n*3/4-nan
	if r2 >= 0 {
		// The median first: the quartiles then lie on either side of it.
		selectNth(rest, r2)
		if r1 >= 0 && r1 < r2 {
			selectNth(rest[:r2], r1)
		}
		if r3 > r2 {
			selectNth(rest[r2+1:], r3-r2-1)
		}
	} else if r3 >= 0 {
		selectNth(rest, r3)
	}
	at := func(r int) float32 {
		if r < 0 {
			return float32(math.NaN())
		}
		return rest[r]
	}
	return at(r1), at(r2), at(r3)
}

// selectNth reorders xs (no NaN) so that xs[k] is what sorting would put
// there, the values before it no greater and those after no smaller:
// Hoare's selection, its pivot the median of three.
func selectNth(xs []float32, k int) {
	lo, hi := 0, len(xs)-1
	for hi > lo {
		mid := lo + (hi-lo)/2
		if xs[mid] < xs[lo] {
			xs[mid], xs[lo] = xs[lo], xs[mid]
		}
		if xs[hi] < xs[lo] {
			xs[hi], xs[lo] = xs[lo], xs[hi]
		}
		if xs[hi] < xs[mid] {
			xs[hi], xs[mid] = xs[mid], xs[hi]
		}
		pivot := xs[mid]
		i, j := lo, hi
		for i <= j {
			for xs[i] < pivot {
				i++
			}
			for xs[j] > pivot {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i++
				j--
			}
		}
		// Now xs[lo..j] <= pivot <= xs[i..hi], and xs[j+1..i-1] == pivot.
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return
		}
	}
}

// score is tool code w's binary score: over the dimensions whose sign it
// shares with the query, the sum of their weights (scoreByMasks, its
// definition).
func (p *queryPlanes) score(w []uint64) int {
	pw := p.words[:len(w)]
	n := 0
	for j, x := range w {
		agree := ^(x ^ pw[j].sign)
		n += bits.OnesCount64(agree&pw[j].nonzero) + bits.OnesCount64(agree&pw[j].b0) + 2*bits.OnesCount64(agree&pw[j].b1)
	}
	return n
}

// scores writes to out the binary score of each tool whose codes are
// signs, p's words uint64s a tool: score's, in assembly where the CPU has
// POPCNT, eight words an instruction where it has AVX-512's
// (BenchmarkBinaryScore: Go checks the CPU at each popcount, and the
// branch spills the sums to the stack).
func (p *queryPlanes) scores(signs []uint64, out []uint16) {
	words := len(p.words)
	if len(out) == 0 || words == 0 {
		return
	}
	signs = signs[:len(out)*words]
	switch {
	case haveAVX512POPCNT:
		binaryScoresAVX512(&signs[0], len(out), words, &p.chunks[0], &out[0])
	case havePOPCNT:
		binaryScoresPOPCNT(&signs[0], len(out), words, &p.words[0], &out[0])
	default:
		for i := range out {
			out[i] = uint16(p.score(signs[i*words : (i+1)*words]))
		}
	}
}

// binaryBuf is the binary pass's scratch: a score per tool, and a
// histogram of the scores per part of the pass.
type binaryBuf struct {
	bin  []uint16
	hist []int
}

// denseCandidates returns the allowed tools with a vector that the dense
// ranking rescores: all of them when there are at most keep (keep 0: no
// limit), otherwise the keep best by binary score, found with a histogram
// of the scores (they are small integers), so no sort of the catalog.
// buf.bin holds a score per tool.
func (sb *denseIndex) denseCandidates(q []float32, ok []bool, keep int, buf *binaryBuf, out []int32) []int32 {
	out = out[:0]
	total := 0
	for i, h := range sb.has {
		if h && ok[i] {
			total++
		}
	}
	if keep <= 0 || total <= keep || len(q) != sb.dim {
		for i, h := range sb.has {
			if h && ok[i] && len(q) == sb.dim {
				out = append(out, int32(i))
			}
		}
		return out
	}
	p := newQueryPlanes(q, sb.words)
	bin := buf.bin[:len(sb.has)]
	size, parts := 4*sb.dim+1, partsOf(len(sb.has))
	buf.hist = slices.Grow(buf.hist[:0], parts*size)[:parts*size]
	clear(buf.hist)
	inParallel(len(sb.has), parts, func(part, lo, hi int) {
		// Every tool is scored, in scope or not, in one call over the run
		// rather than a branch per tool; the histogram counts those in
		// scope with a vector.
		p.scores(sb.signs[lo*sb.words:hi*sb.words], bin[lo:hi])
		h := buf.hist[part*size : (part+1)*size]
		for i := lo; i < hi; i++ {
			if sb.has[i] && ok[i] {
				h[bin[i]]++
			}
		}
	})
	hist := buf.hist[:size]
	for part := 1; part < parts; part++ {
		for s, c := range buf.hist[part*size : (part+1)*size] {
			hist[s] += c
		}
	}
	// The cut: the highest score at which keep tools are reached; tools
	// above it all go in, tools at it fill up in catalog order.
	cut, above := len(hist)-1, 0
	for ; cut > 0 && above+hist[cut] < keep; cut-- {
		above += hist[cut]
	}
	// Without a branch per tool: whether a tool goes in is a coin toss
	// the CPU would mispredict at every other tool. Each tool is written
	// at n, which moves on past those that go in (keep in all).
	room := keep - above
	out = slices.Grow(out, keep+1)[:keep+1]
	ok = ok[:len(sb.has)]
	n := 0
	for i, h := range sb.has {
		s := int(bin[i])
		in := b2i(h) & b2i(ok[i])
		at := in & b2i(s == cut) & b2i(room > 0)
		out[n] = int32(i)
		n += in&b2i(s > cut) | at
		room -= at
	}
	return out[:n]
}

// b2i is 1 for true, 0 for false (compiled without a branch).
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// parallelMin is the least work (tools) worth a goroutine of its own.
const parallelMin = 16_384

// partsOf is how many parts to cut [0, n) into: up to GOMAXPROCS, at
// least parallelMin each.
func partsOf(n int) int { return max(1, min(runtime.GOMAXPROCS(0), n/parallelMin)) }

// inParallel runs f over [0, n) cut in parts parts (partsOf(n), taken
// once by the caller, who may keep something per part: GOMAXPROCS may
// change meanwhile), numbered from 0, each on a goroutine of its own when
// there are several.
func inParallel(n, parts int, f func(part, lo, hi int)) {
	if parts == 1 {
		f(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	step := (n + parts - 1) / parts
	for k := range parts {
		wg.Go(func() { f(k, k*step, min((k+1)*step, n)) })
	}
	wg.Wait()
}
