package selection

import (
	"bufio"
	"context"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/access"
	"toolbelt/services/catalog"
	"toolbelt/services/embed"
)

// TestTuneRetrieval sweeps the ranking's tuning over a benchmark's dev
// and history splits (docs/benchmarks.md, "Tuning"). It is skipped unless
// TOOLBELT_TUNE names the benchmark directory (tools.jsonl, dev.jsonl,
// history.jsonl). With TOOLBELT_TUNE_OLLAMA (and TOOLBELT_TUNE_MODEL) it
// uses that embedding server, caching every vector in TOOLBELT_TUNE_CACHE
// (default: a file in the temporary directory), so a sweep embeds each
// text once; TOOLBELT_TUNE_ONLY runs only the settings whose name matches it (a regular expression). History is loaded as learned queries directly, as feedback
// would record them; the bench command's figures are the reference.
func TestTuneRetrieval(t *testing.T) {
	dir := os.Getenv("TOOLBELT_TUNE")
	if dir == "" {
		t.Skip("set TOOLBELT_TUNE to a benchmark directory to sweep the ranking")
	}
	ctx := context.Background()
	emb := tuneEmbedder(t)
	tools := readLines[struct {
		Name, Description string
	}](t, filepath.Join(dir, "tools.jsonl"))
	dev := readLines[tuneQuery](t, filepath.Join(dir, "dev.jsonl"))
	history := readLines[tuneQuery](t, filepath.Join(dir, "history.jsonl"))

	store, _ := modelstest.Store(t)
	authz, err := access.OpenAuthz(ctx, access.AuthzDeps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	reg := catalog.NewRegistry(store, quiet)
	for _, tl := range tools {
		if _, err := reg.Register(ctx, testTool(tl.Name, tl.Description), nil); err != nil {
			t.Logf("skip %s: %v", tl.Name, err)
		}
	}
	s := New(Deps{Store: store, Authz: authz, Embedder: emb, Host: allHost(), Log: quiet})
	running(t, s.Run)
	refreshEmbedded(ctx, t, s)
	// Query vectors, once: dev and history alike.
	var texts []string
	for _, q := range slices.Concat(dev, history) {
		texts = append(texts, q.Query)
	}
	vecs, err := emb.Embed(ctx, embed.Query, texts)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vecs {
		s.queryEmbed.cache.Add(emb.Model(), texts[i], v)
	}
	learned := learnedOf(emb.Model(), history, vecs[len(dev):])
	warm := newLearnedIndex(emb.Model(), s.tok, learned)
	cold := newLearnedIndex(emb.Model(), s.tok, nil)
	base := s.cfg.tune
	passes := 2
	if os.Getenv("TOOLBELT_TUNE_COLD") != "" { // cold only
		passes = 1
	}
	only := regexp.MustCompile(os.Getenv("TOOLBELT_TUNE_ONLY")) // run the settings whose name matches
	for _, c := range tuneConfigs(base) {
		if !only.MatchString(c.name) {
			continue
		}
		s.cfg.tune = c.tune
		// The terms follow the tuning, and the model's text may: the
		// vectors are stored by text.
		s.catalog.docs = map[uint]*docInfo{}
		refreshEmbedded(ctx, t, s)
		var out []string
		for _, li := range []*learnedIndex{cold, warm}[:passes] {
			s.learning.queries.Store(li)
			m := measure(ctx, s, dev)
			out = append(out, m.String())
		}
		t.Logf("%-40s cold %s | history %s", c.name, out[0], out[passes-1])
		s.learning.queries.Store(cold)
		t.Logf("%-40s %s", "", gibberishWeak(ctx, s, dev))
	}
}

// learnedOf is history as feedback records it: one learned query per
// (tool, query), the newest DefaultKeepLearned per tool; vecs are the
// history queries' vectors.
func learnedOf(model string, history []tuneQuery, vecs [][]float32) []models.LearnedQuery {
	var learned []models.LearnedQuery
	seen := map[string]bool{}
	perTool := map[string]int{}
	for i := len(history) - 1; i >= 0; i-- {
		q := history[i]
		for _, g := range q.Gold {
			if seen[g+"\x00"+q.Query] || perTool[g] >= DefaultKeepLearned {
				continue
			}
			seen[g+"\x00"+q.Query] = true
			perTool[g]++
			learned = append(learned, models.LearnedQuery{ID: uint(len(learned) + 1), ToolName: g, Query: q.Query,
				Model: model, Vector: encodeVector(vecs[i])})
		}
	}
	return learned
}

// TestTuneIntents sweeps the floor of an intent's ranking (merge.go) over
// a benchmark's dev split, registering its tools with their parameters as
// `bench retrieval` does. It is skipped unless TOOLBELT_TUNE_INTENTS names
// the benchmark directory (tools.jsonl, dev.jsonl, and history.jsonl if
// it has one: then each floor is measured cold and after the history);
// the embedder is chosen as TestTuneRetrieval's is, and
// TOOLBELT_TUNE_FLOORS lists the floors (default 0.3 to 0.7). It reports
// Recall@10 and the share of queries with all their gold in the top 10,
// per subset (intentRecall).
func TestTuneIntents(t *testing.T) {
	dir := os.Getenv("TOOLBELT_TUNE_INTENTS")
	if dir == "" {
		t.Skip("set TOOLBELT_TUNE_INTENTS to a benchmark directory to sweep the intents' floor")
	}
	ctx := context.Background()
	emb := tuneEmbedder(t)
	tools := readLines[struct {
		Name, Description, Category string
		Parameters                  json.RawMessage
	}](t, filepath.Join(dir, "tools.jsonl"))
	dev := readLines[intentQuery](t, filepath.Join(dir, "dev.jsonl"))
	store, _ := modelstest.Store(t)
	authz, err := access.OpenAuthz(ctx, access.AuthzDeps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	reg := catalog.NewRegistry(store, quiet)
	for _, tl := range tools {
		d := testTool(tl.Name, tl.Description)
		d.Parameters = tl.Parameters
		if tl.Category != "" {
			d.Category = tl.Category
		}
		if _, err := reg.Register(ctx, d, nil); err != nil {
			t.Logf("skip %s: %v", tl.Name, err)
		}
	}
	s := New(Deps{Store: store, Authz: authz, Embedder: emb, Host: allHost(), Log: quiet})
	running(t, s.Run)
	refreshEmbedded(ctx, t, s)
	floors := []float64{0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7}
	if list := os.Getenv("TOOLBELT_TUNE_FLOORS"); list != "" {
		floors = nil
		for _, f := range strings.Split(list, ",") {
			var v float64
			if _, err := fmt.Sscan(f, &v); err != nil {
				t.Fatalf("TOOLBELT_TUNE_FLOORS: %v", err)
			}
			floors = append(floors, v)
		}
	}
	// With a history split, each setting is measured cold and again after
	// it, as TestTuneRetrieval does.
	passes := map[string]*learnedIndex{"cold": newLearnedIndex(emb.Model(), s.tok, nil)}
	if _, err := os.Stat(filepath.Join(dir, "history.jsonl")); err == nil {
		history := readLines[tuneQuery](t, filepath.Join(dir, "history.jsonl"))
		var texts []string
		for _, q := range history {
			texts = append(texts, q.Query)
		}
		vecs, err := emb.Embed(ctx, embed.Query, texts)
		if err != nil {
			t.Fatal(err)
		}
		passes["history"] = newLearnedIndex(emb.Model(), s.tok, learnedOf(emb.Model(), history, vecs))
	}
	for _, pass := range slices.Sorted(maps.Keys(passes)) {
		s.learning.queries.Store(passes[pass])
		for _, f := range floors {
			s.cfg.tune.intentFloor = f
			t.Logf("%s, floor %.2f: %s", pass, f, intentRecall(ctx, s, dev))
		}
	}
}

// intentQuery is a labelled query of a benchmark split with its subset.
type intentQuery struct {
	Query  string   `json:"query"`
	Gold   []string `json:"gold"`
	Subset string   `json:"subset"`
}

// intentRecall ranks each query as a selection of 15 with the default
// min_score would, intents and all, and says Recall@10 and the share of
// queries with all their gold in the top 10, overall and per subset.
func intentRecall(ctx context.Context, s *Selector, qs []intentQuery) string {
	ix := s.catalog.snapshot.Load()
	in := scope{vis: visibility{all: true}, minScore: DefaultMinScore}
	type score struct{ r10, all, n float64 }
	by := map[string]*score{}
	for _, q := range qs {
		ranked, _ := s.rankTask(ctx, ix, task{focus: q.Query}, in, 15)
		var names []string
		for _, r := range ranked {
			if r.score >= DefaultMinScore {
				names = append(names, ix.entries[r.entry].name)
			}
		}
		r := recall(names, q.Gold, 10)
		for _, k := range []string{"all", q.Subset} {
			if by[k] == nil {
				by[k] = &score{}
			}
			by[k].r10 += r
			if r == 1 {
				by[k].all++
			}
			by[k].n++
		}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(by)) {
		sc := by[k]
		out = append(out, fmt.Sprintf("%s R@10 %.2f all@10 %.2f", k, 100*sc.r10/sc.n, 100*sc.all/sc.n))
	}
	return strings.Join(out, " | ")
}

// tuneEmbedder is the built-in embedder, or with TOOLBELT_TUNE_OLLAMA (and
// TOOLBELT_TUNE_MODEL) that embedding server's model, every vector cached
// in TOOLBELT_TUNE_CACHE (default: a file in the temporary directory) so a
// sweep embeds each text once.
func tuneEmbedder(t *testing.T) embed.Embedder {
	url := os.Getenv("TOOLBELT_TUNE_OLLAMA")
	if url == "" {
		return embed.NewBuiltin()
	}
	model := orDefault(os.Getenv("TOOLBELT_TUNE_MODEL"), "use-lite")
	o, err := embed.NewOllama(embed.OllamaConfig{URL: url, Model: model})
	if err != nil {
		t.Fatal(err)
	}
	file := orDefault(os.Getenv("TOOLBELT_TUNE_CACHE"), filepath.Join(os.TempDir(), "toolbelt-tune-"+model+".gob"))
	c := &cachedEmbedder{inner: o, file: file}
	c.load()
	t.Cleanup(func() { c.save(t) })
	return c
}

// gibberishWeak says how the best scores of the dev queries and of 200
// random-letter queries (1 to 4 words) fall against GoodMatchScore:
// what no_good_match would say of each, cold.
func gibberishWeak(ctx context.Context, s *Selector, dev []tuneQuery) string {
	r := rand.New(rand.NewPCG(7, 8))
	var gibberish []tuneQuery
	for range 200 {
		var words []string
		for range 1 + r.IntN(4) {
			b := make([]byte, 3+r.IntN(6))
			for i := range b {
				b[i] = byte('a' + r.IntN(26))
			}
			words = append(words, string(b))
		}
		gibberish = append(gibberish, tuneQuery{Query: strings.Join(words, " ")})
	}
	best := func(qs []tuneQuery) (weak int, p50, p99 float64) {
		var tops []float64
		for _, q := range qs {
			top := 0.0
			if ranked := s.rank(ctx, s.catalog.snapshot.Load(), task{focus: q.Query}, scope{vis: visibility{all: true}}, 1); len(ranked) > 0 {
				top = ranked[0].score
			}
			if top < GoodMatchScore {
				weak++
			}
			tops = append(tops, top)
		}
		slices.Sort(tops)
		return weak, tops[len(tops)/2], tops[len(tops)*99/100]
	}
	dw, d50, d99 := best(dev)
	gw, g50, g99 := best(gibberish)
	return fmt.Sprintf("best score under %.2f: dev %d of %d (p50 %.3f, p99 %.3f), gibberish %d of %d (p50 %.3f, p99 %.3f)",
		GoodMatchScore, dw, len(dev), d50, d99, gw, len(gibberish), g50, g99)
}

// refreshEmbedded refreshes s and waits until every tool has its vector
// (a catalog this size is embedded in the background).
func refreshEmbedded(ctx context.Context, t *testing.T, s *Selector) {
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitEmbedded(ctx); err != nil {
		t.Fatal(err)
	}
}

// tuneConfig is one setting of a sweep.
type tuneConfig struct {
	name string
	tune tuning
}

// tuneConfigs lists the settings swept, the default first.
func tuneConfigs(base tuning) []tuneConfig {
	out := []tuneConfig{{"default", base}}
	vary := func(name string, f func(*tuning)) {
		c := base
		f(&c)
		out = append(out, tuneConfig{name, c})
	}
	for _, f := range []float64{0, 0.3, 0.7} {
		vary(fmt.Sprintf("modelCoverage=%g", f), func(c *tuning) { c.modelCoverage = f })
	}
	for _, p := range []float64{0, 1, 100} {
		vary(fmt.Sprintf("modelCentre=%g", p), func(c *tuning) { c.modelCentre = p })
	}
	for _, p := range []float64{0, 4, 32} {
		vary(fmt.Sprintf("builtinCentre=%g", p), func(c *tuning) { c.builtinCentre = p })
	}
	for _, w := range []float64{0, 0.5, 2} {
		vary(fmt.Sprintf("nameGrams=%g", w), func(c *tuning) { c.nameGrams = w })
	}
	for _, w := range []float64{1, 1.25, 1.75, 2} {
		vary(fmt.Sprintf("modelDense=%g", w), func(c *tuning) { c.modelDense = w })
	}
	for _, f := range []float32{0, 0.1, 0.3, 0.4} {
		vary(fmt.Sprintf("learnedFloor=%g", f), func(c *tuning) { c.learnedFloor = f })
	}
	for _, w := range []float64{0.3, 0.6, 1} {
		vary(fmt.Sprintf("builtinDense=%g", w), func(c *tuning) { c.builtinDense = w })
	}
	for _, n := range []int{20, 40, 80, 120} {
		vary(fmt.Sprintf("denseTop=%d", n), func(c *tuning) { c.modelDenseTop, c.builtinDenseTop = n, n })
	}
	for _, k1 := range []float32{0.6, 0.9, 1.5, 2} {
		vary(fmt.Sprintf("bm25.k1=%g", k1), func(c *tuning) { c.bm25.k1 = k1 })
	}
	for _, b := range []float32{0, 0.1, 0.5, 0.75, 0.9} {
		vary(fmt.Sprintf("bm25.b=%g", b), func(c *tuning) { c.bm25.b = b })
	}
	for _, n := range []int{0, 2, 3} {
		vary(fmt.Sprintf("nameRepeat=%d", n), func(c *tuning) { c.nameRepeat = n })
	}
	for _, w := range []float64{1, 2, 5} {
		vary(fmt.Sprintf("learnedLexical=%g", w), func(c *tuning) { c.learnedLexical = w })
	}
	for _, w := range []float64{0, 0.5, 2} {
		vary(fmt.Sprintf("learnedDense=%g", w), func(c *tuning) { c.learnedDense = w })
	}
	for _, w := range []float64{0, 1, 3} {
		vary(fmt.Sprintf("learnedNear=%g", w), func(c *tuning) { c.learnedNear = w })
	}
	for _, f := range []float32{0.3, 0.7} {
		vary(fmt.Sprintf("nearFloor=%g", f), func(c *tuning) { c.nearFloor = f })
	}
	for _, p := range []int{20, 80} {
		vary(fmt.Sprintf("nearPool=%d", p), func(c *tuning) { c.nearPool = p })
	}
	for _, n := range []int{64, 500} {
		vary(fmt.Sprintf("nearPerTool=%d", n), func(c *tuning) { c.nearPerTool = n })
	}
	for _, k1 := range []float32{0.6, 2} {
		vary(fmt.Sprintf("learnedBM25.k1=%g", k1), func(c *tuning) { c.learnedBM25.k1 = k1 })
	}
	for _, b := range []float32{0.3, 0.9} {
		vary(fmt.Sprintf("learnedBM25.b=%g", b), func(c *tuning) { c.learnedBM25.b = b })
	}
	return out
}

type tuneQuery struct {
	Query string   `json:"query"`
	Gold  []string `json:"gold"`
}

// tuneMeasure is what one pass over the dev queries measured.
type tuneMeasure struct {
	r5, r10, r15, ndcg float64
	r10all             float64 // Recall@10 with no min_score
	noGood             int     // queries whose best score is under GoodMatchScore
	n                  int
	lat                []time.Duration // of each ranking
}

func (m tuneMeasure) String() string {
	n := float64(m.n)
	slices.Sort(m.lat)
	return fmt.Sprintf("R@5 %.2f R@10 %.2f R@15 %.2f NDCG %.2f (R@10 any score %.2f, weak %d, rank p50 %v)",
		100*m.r5/n, 100*m.r10/n, 100*m.r15/n, 100*m.ndcg/n, 100*m.r10all/n, m.noGood, m.lat[len(m.lat)/2].Round(time.Microsecond))
}

// measure ranks every query as a selection of 15 with the default
// min_score would.
func measure(ctx context.Context, s *Selector, qs []tuneQuery) tuneMeasure {
	ix := s.catalog.snapshot.Load()
	all := scope{vis: visibility{all: true}}
	var m tuneMeasure
	for _, q := range qs {
		start := time.Now()
		ranked := s.rank(ctx, ix, task{focus: q.Query}, all, 15)
		m.lat = append(m.lat, time.Since(start))
		if len(ranked) == 0 || ranked[0].score < GoodMatchScore {
			m.noGood++
		}
		var names, all []string
		for _, r := range ranked {
			if r.score >= DefaultMinScore {
				names = append(names, ix.entries[r.entry].name)
			}
			all = append(all, ix.entries[r.entry].name)
		}
		m.r10all += recall(all, q.Gold, 10)
		m.r5 += recall(names, q.Gold, 5)
		m.r10 += recall(names, q.Gold, 10)
		m.r15 += recall(names, q.Gold, 15)
		m.ndcg += ndcg(names, q.Gold, 10)
		m.n++
	}
	return m
}

func recall(got, gold []string, k int) float64 {
	hits := 0
	for _, g := range gold {
		if slices.Contains(got[:min(k, len(got))], g) {
			hits++
		}
	}
	return float64(hits) / float64(len(gold))
}

func ndcg(got, gold []string, k int) float64 {
	var dcg, idcg float64
	for i := range min(k, len(got)) {
		if slices.Contains(gold, got[i]) {
			dcg += 1 / math.Log2(float64(i+2))
		}
	}
	for i := range min(k, len(gold)) {
		idcg += 1 / math.Log2(float64(i+2))
	}
	return dcg / idcg
}

func readLines[T any](t *testing.T, path string) []T {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			var v T
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// cachedEmbedder embeds each text once, keeping the vectors in a file
// between runs.
type cachedEmbedder struct {
	inner *embed.Ollama
	file  string
	vecs  map[string][]float32
	dirty bool
}

func (c *cachedEmbedder) Model() string { return c.inner.Model() }

func (c *cachedEmbedder) Dim() int { return c.inner.Dim() }

func (c *cachedEmbedder) load() {
	c.vecs = map[string][]float32{}
	if f, err := os.Open(c.file); err == nil {
		_ = gob.NewDecoder(f).Decode(&c.vecs)
		f.Close()
	}
}

func (c *cachedEmbedder) save(t *testing.T) {
	if !c.dirty {
		return
	}
	f, err := os.Create(c.file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := gob.NewEncoder(f).Encode(c.vecs); err != nil {
		t.Fatal(err)
	}
}

func (c *cachedEmbedder) Embed(ctx context.Context, kind embed.Kind, texts []string) ([][]float32, error) {
	key := func(s string) string { return fmt.Sprint(kind) + "\x00" + s }
	var miss []string
	asked := map[string]bool{}
	for _, s := range texts {
		if _, ok := c.vecs[key(s)]; !ok && !asked[s] {
			asked[s] = true
			miss = append(miss, s)
		}
	}
	if len(miss) > 0 {
		vecs, err := c.inner.Embed(ctx, kind, miss)
		if err != nil {
			return nil, err
		}
		for i, s := range miss {
			c.vecs[key(s)] = vecs[i]
		}
		c.dirty = true
	}
	out := make([][]float32, len(texts))
	for i, s := range texts {
		out[i] = c.vecs[key(s)]
	}
	return out, nil
}
