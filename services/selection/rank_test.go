package selection

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"toolbelt/models"
	"toolbelt/services/catalog"
	"toolbelt/services/embed"
	"toolbelt/services/tooldef"
)

// TestRankForgetsFilteredScores: a ranking for a caller who may not see a
// tool leaves nothing behind in the pooled buffers, so the next ranking,
// for a caller who may, finds the tool as before (a lexical score left
// over kept it out of the next caller's matches: "run a python snippet"
// scored 0.01 under load).
func TestRankForgetsFilteredScores(t *testing.T) {
	s := memSelector(t, 500)
	ix := s.catalog.snapshot.Load()
	ctx := context.Background()
	all := scope{vis: visibility{all: true}}
	checked := 0
	for _, q := range SyntheticQueries(20, 3) {
		want := s.rank(ctx, ix, task{focus: q}, all, 5)
		if len(want) == 0 {
			continue
		}
		checked++
		top := want[0].entry
		s.rank(ctx, ix, task{focus: q}, scope{vis: visibility{all: true}, exclude: map[string]bool{ix.entries[top].category: true}}, 5)
		got := s.rank(ctx, ix, task{focus: q}, all, 5)
		if len(got) != len(want) || got[0].entry != top || got[0].score != want[0].score {
			t.Fatalf("%q: after a filtered ranking the top is %v, was %v", q, got, want)
		}
	}
	if checked < 10 {
		t.Fatalf("only %d of 20 queries found a tool: the test proves nothing", checked)
	}
}

// TestScopeFill checks the ranking's scope against its definition, for
// random catalogs and callers: a tool is in scope when this host can run
// it, the caller's visibility allows it (a category granted, or a safe
// tool granted by name: never a moderate or dangerous one by name) and
// the request's categories take it. Grants naming tools that do not
// exist, categories no tool has and tools of an unlisted category are
// among the cases.
func TestScopeFill(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cats := append(slices.Clone(tooldef.Categories), "unlisted")
	levels := []string{tooldef.LevelSafe, tooldef.LevelModerate, tooldef.LevelDangerous}
	pick := func(from []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range from {
			if rng.IntN(3) == 0 {
				m[x] = true
			}
		}
		return m
	}
	for round := range 200 {
		ix := &index{byName: map[string]int{}}
		var names []string
		for i := range 300 {
			e := &entry{name: fmt.Sprintf("tool_%d", i), category: cats[rng.IntN(len(cats))], level: levels[rng.IntN(3)], runnable: rng.IntN(5) > 0}
			ix.entries = append(ix.entries, e)
			ix.byName[e.name] = i
			ix.runnable = append(ix.runnable, e.runnable)
			ix.cat = append(ix.cat, categoryID(e.category))
			names = append(names, e.name)
		}
		in := scope{vis: visibility{all: round%5 == 0, categories: pick(cats), tools: pick(append(names, "no_such_tool"))}}
		if round%2 == 1 {
			in.include, in.exclude = pick(cats), pick(cats)
		}
		ok := make([]bool, len(ix.entries))
		in.fill(ix, ok)
		for i, e := range ix.entries {
			want := e.runnable && in.vis.allows(e) && (len(in.include) == 0 || in.include[e.category]) && !in.exclude[e.category]
			if ok[i] != want {
				t.Fatalf("round %d: %+v in scope %v, want %v (scope %+v)", round, *e, ok[i], want, in)
			}
		}
	}
}

// TestRanksOf checks the one-pass ranks against their definition (1 + the
// listed tools scoring above, 0 without a positive score) on random
// scores with many ties and non-positive ones.
func TestRanksOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 500 {
		n := 1 + rng.IntN(60)
		scores := make([]float32, n)
		for i := range scores {
			scores[i] = float32(rng.IntN(7) - 2) // ties, zeros and negatives
		}
		var list, of []int32
		for i := range int32(n) {
			if rng.IntN(4) > 0 {
				list = append(list, i)
			}
			if rng.IntN(3) == 0 {
				of = append(of, i)
			}
		}
		got := ranksOf(list, scores, of)
		for k, i := range of {
			want := 0
			if scores[i] > 0 {
				want = 1
				for _, j := range list {
					if scores[j] > scores[i] {
						want++
					}
				}
			}
			if got[k] != want {
				t.Fatalf("round %d: rank of %d (score %v) %d, want %d; scores %v list %v", round, i, scores[i], got[k], want, scores, list)
			}
		}
	}
}

// ranksOf is ranksAmong for tools of a list, by tool: the ranks of the
// tools of among the listed ones.
func ranksOf(list []int32, scores []float32, of []int32) []int {
	listed, at := make([]float32, len(list)), make([]float32, len(of))
	for k, j := range list {
		listed[k] = scores[j]
	}
	for p, i := range of {
		at[p] = scores[i]
	}
	return ranksAmong(listed, at)
}

// ranksOfBySearch is ranksOf as it was, each listed score placed among
// of's by binary search: the reference its count is held to.
func ranksOfBySearch(list []int32, scores []float32, of []int32) []int {
	by := make([]int, len(of))
	for p := range by {
		by[p] = p
	}
	slices.SortFunc(by, func(a, b int) int { return cmp.Compare(scores[of[b]], scores[of[a]]) })
	above := make([]int, len(of)+1)
	floor := float32(math.Inf(1))
	for _, i := range of {
		if s := scores[i]; s > 0 {
			floor = min(floor, s)
		}
	}
	for _, j := range list {
		s := scores[j]
		if s <= floor {
			continue
		}
		p, _ := slices.BinarySearchFunc(by, s, func(q int, s float32) int { return cmp.Compare(s, scores[of[q]]) })
		for p < len(by) && scores[of[by[p]]] == s {
			p++
		}
		above[p]++
	}
	ranks := make([]int, len(of))
	n := 0
	for p, q := range by {
		n += above[p]
		if scores[of[q]] > 0 {
			ranks[q] = n + 1
		}
	}
	return ranks
}

// FuzzRanksOf holds ranksOf to the binary search it replaced, on scores
// with ties, zeros, negatives, infinities and NaN, and of of any length.
func FuzzRanksOf(f *testing.F) {
	f.Add(int64(1), uint8(30), uint8(12))
	f.Add(int64(2), uint8(200), uint8(40))
	f.Add(int64(3), uint8(5), uint8(0))
	f.Fuzz(func(t *testing.T, seed int64, n, k uint8) {
		rng := rand.New(rand.NewPCG(uint64(seed), 6))
		special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
		scores := make([]float32, int(n)+1)
		for i := range scores {
			switch rng.IntN(4) {
			case 0:
				scores[i] = special[rng.IntN(len(special))]
			case 1:
				scores[i] = float32(rng.IntN(5)) / 4 // ties
			default:
				scores[i] = float32(rng.NormFloat64())
			}
		}
		var list []int32
		for i := range int32(len(scores)) {
			if rng.IntN(3) > 0 {
				list = append(list, i)
			}
		}
		of := make([]int32, int(k)%41)
		for p := range of {
			of[p] = int32(rng.IntN(len(scores)))
		}
		if got, want := ranksOf(list, scores, of), ranksOfBySearch(list, scores, of); !slices.Equal(got, want) {
			t.Fatalf("ranks %v, by binary search %v; scores %v list %v of %v", got, want, scores, list, of)
		}
	})
}

// BenchmarkRanksOf is the dense ranks of a selection's 12 or 40 tools
// among 4,096 dense candidates (SelectOverhead10k's), by ranksAmong and
// by the binary search it replaced.
func BenchmarkRanksOf(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	listed := make([]float32, 4096)
	for k := range listed {
		listed[k] = float32(rng.NormFloat64() / 22) // cosines of 512-dimension random vectors
	}
	for _, n := range []int{12, 40} {
		at := make([]float32, n)
		for p := range at {
			at[p] = listed[rng.IntN(len(listed))]
		}
		// ranksOfBySearch takes scores by tool: here tool k's is listed[k],
		// and the returned tools are 4096 onwards.
		scores := append(slices.Clone(listed), at...)
		list, of := make([]int32, len(listed)), make([]int32, n)
		for k := range list {
			list[k] = int32(k)
		}
		for p := range of {
			of[p] = int32(len(listed) + p)
		}
		b.Run(fmt.Sprintf("among/%d", n), func(b *testing.B) {
			for b.Loop() {
				ranksAmong(listed, at)
			}
		})
		b.Run(fmt.Sprintf("search/%d", n), func(b *testing.B) {
			for b.Loop() {
				ranksOfBySearch(list, scores, of)
			}
		})
	}
}

// matchedWordsPerTool is the matched words as they were found, the query
// split and stemmed again for each tool: the reference for wordStems.
func matchedWordsPerTool(tok *embed.Tokenizer, query string, docTerms []string) []string {
	have := map[string]bool{}
	for _, t := range docTerms {
		have[t] = true
	}
	out := []string{}
	for _, w := range embed.Words(query) {
		if !embed.IsStopWord(w) && have[tok.Stem(w)] && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// TestMatchedWords: the query's words stemmed once name the same words,
// in the same order, as the query stemmed for each tool, over synthetic
// tools and queries with repeated words, stop words and words sharing a
// stem.
func TestMatchedWords(t *testing.T) {
	tok := embed.NewTokenizer()
	queries := append(SyntheticQueries(200, 5), "", "the the a", "read files, the file and FILES again", "files file filing",
		"export the export of exports to CSV", "x y z 42 4")
	var docs [][]string
	for _, def := range SyntheticTools(100, 5) {
		text, _ := retrievalTexts(&def)
		docs = append(docs, tok.Terms(text))
	}
	docs = append(docs, nil, tok.Terms("file files read export csv 42"))
	for _, q := range queries {
		ws := queryWords(tok, q)
		for _, d := range docs {
			got, want := ws.matched(d), matchedWordsPerTool(tok, q, d)
			if !slices.Equal(got, want) || got == nil {
				t.Fatalf("query %q, terms %v: matched %#v, per tool %#v", q, d, got, want)
			}
		}
	}
}

// combineByTool is combine as it was for the dense signal, its scores by
// tool and its cut the top-th largest of the listed ones: the reference
// for combineTop.
func combineByTool(sc *scratch, list []int32, scores []float32, weight float64, top int, full float32) {
	if full <= 0 || weight <= 0 {
		return
	}
	cut := float32(0)
	if top > 0 {
		var listed []float32
		for _, i := range list {
			if scores[i] > 0 {
				listed = append(listed, scores[i])
			}
		}
		slices.SortFunc(listed, func(a, b float32) int { return cmp.Compare(b, a) })
		if len(listed) >= top {
			cut = listed[top-1]
		}
	}
	for _, i := range list {
		if s := scores[i]; s > 0 && s >= cut {
			if sc.fused[i] == 0 {
				sc.hits = append(sc.hits, i)
			}
			sc.fused[i] += weight * float64(min(s/full, 1))
		}
	}
}

// FuzzCombineTop holds combineTop, its scores in the list's order, to
// the per-tool combine it replaced for the dense signal: the same fused
// scores and the same hits in the same order, over ties at the cut,
// non-positive scores, lists shorter than top and tools fused already.
func FuzzCombineTop(f *testing.F) {
	f.Add(int64(1), uint8(60), uint8(40))
	f.Add(int64(2), uint8(10), uint8(40))
	f.Add(int64(3), uint8(200), uint8(0))
	f.Add(int64(4), uint8(90), uint8(5))
	f.Fuzz(func(t *testing.T, seed int64, n, top uint8) {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		tools := int(n) + 1
		scores := make([]float32, tools)
		var list []int32
		var vals []float32
		for i := range int32(tools) {
			if rng.IntN(3) == 0 {
				continue
			}
			switch rng.IntN(4) {
			case 0:
				scores[i] = float32(rng.IntN(4)) / 4 // ties, zeros
			case 1:
				scores[i] = -float32(rng.Float64())
			default:
				scores[i] = float32(rng.Float64())
			}
			list = append(list, i)
			vals = append(vals, scores[i])
		}
		got, want := getScratch(tools), getScratch(tools)
		defer got.release()
		defer want.release()
		for i := range tools { // some tools fused by an earlier signal
			if rng.IntN(4) == 0 {
				got.fused[i], want.fused[i] = 0.5, 0.5
				got.hits, want.hits = append(got.hits, int32(i)), append(want.hits, int32(i))
			}
		}
		got.combineTop(list, vals, 0.7, int(top)%50, 1)
		combineByTool(want, list, scores, 0.7, int(top)%50, 1)
		if !slices.Equal(got.fused, want.fused) || !slices.Equal(got.hits, want.hits) {
			t.Fatalf("top %d: fused %v hits %v, by tool %v hits %v", top, got.fused, got.hits, want.fused, want.hits)
		}
	})
}

// TestNameGramsFindNamesRunTogether: a tool named with words run
// together is found by those words, which its description lacks.
func TestNameGramsFindNamesRunTogether(t *testing.T) {
	ctx := context.Background()
	store, authz := catalogFixture(t, 0)
	reg := catalog.NewRegistry(store, quiet)
	if _, err := reg.Register(ctx, testTool("stellarexplorer", "Browse pictures of planets and galaxies taken by NASA."), nil); err != nil {
		t.Fatal(err)
	}
	s := newFixtureSelector(t, store, authz, embed.NewBuiltin(), 0)
	res, err := s.Select(ctx, nil, SelectRequest{Query: "a stellar explorer app"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) == 0 || res.Tools[0].Name != "stellarexplorer" {
		t.Fatalf("tools %+v; want stellarexplorer first", res.Tools)
	}
}

// TestNearestLearnedQuery: a tool's nearest learned query is the best
// cosine among its newest perTool queries, not their centroid's.
func TestNearestLearnedQuery(t *testing.T) {
	vec := func(xs ...float32) []byte { return encodeVector(embed.Normalize(xs)) }
	li := newLearnedIndex("m", embed.NewTokenizer(), []models.LearnedQuery{ // newest first
		{ID: 3, ToolName: "a", Query: "three", Model: "m", Vector: vec(0, 1, 0)},
		{ID: 2, ToolName: "a", Query: "two", Model: "m", Vector: vec(0, 0, 1)},
		{ID: 1, ToolName: "a", Query: "one", Model: "m", Vector: vec(1, 0, 0)},
		{ID: 4, ToolName: "b", Query: "four", Model: "m", Vector: vec(1, 1, 0)},
	})
	q := embed.Normalize([]float32{1, 0, 0})
	got := li.nearest([]string{"a", "b", "c"}, q, 3)
	if got[0] < 0.999 || got[1] < 0.70 || got[1] > 0.71 || got[2] != 0 {
		t.Errorf("nearest = %v; want 1 for a (its query one), 0.707 for b, 0 for c", got)
	}
	// Only the newest two of a: its query "one" is not compared.
	if got := li.nearest([]string{"a"}, q, 2); got[0] != 0 {
		t.Errorf("nearest of a's newest two = %v; want 0", got)
	}
}

// TestCombineListsEachToolOnce: a signal of weight 0 (a tuning that turns
// it off) adds nothing, so a tool it found is listed once when the next
// signal finds it (it was listed twice, and a ranking returned it twice).
func TestCombineListsEachToolOnce(t *testing.T) {
	sc := getScratch(4)
	defer sc.release()
	list, scores := []int32{1, 2}, []float32{0, 0.5, 0.8, 0}
	sc.combine(list, scores, 0, 1)
	sc.combine(list, scores, 1, 1)
	if !slices.Equal(sc.hits, []int32{1, 2}) {
		t.Errorf("hits %v, want [1 2]", sc.hits)
	}
}

// TestRetrievalDetails: a tool's retrieval text reads its schema whole:
// nested properties under their parents' names, an array's items, the
// string values of enums (at most enumShown), to paramDepth levels, and
// nothing of a schema that is not an object.
func TestRetrievalDetails(t *testing.T) {
	enum := make([]any, 0, enumShown+5)
	for i := range enumShown + 5 {
		enum = append(enum, fmt.Sprintf("city%02d", i))
	}
	params, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"unit": map[string]any{"type": "string", "description": "Temperature unit", "enum": []any{"celsius", "fahrenheit", 3}},
			"flight": map[string]any{"type": "object", "description": "The flight", "properties": map[string]any{
				"airline": map[string]any{"type": "string", "enum": []any{"Delta", "United"}},
				"legs": map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{
					"fromCity": map[string]any{"type": "string", "description": "Where the leg starts", "enum": enum,
						"properties": map[string]any{"tooDeep": map[string]any{"description": "never read"}}},
				}}},
			}},
		},
	})
	def := tooldef.Definition{Name: "book_trip", Description: "Book a trip.", Parameters: params, Tags: []string{"travel"}, Examples: []string{"fly to Oslo"}}
	got := retrievalDetails(&def)
	want := "\nTags: travel" +
		"\nParameter flight: The flight" +
		"\nParameter flight airline (one of: Delta, United)" +
		"\nParameter flight legs" +
		"\nParameter flight legs from city: Where the leg starts (one of: " + strings.Join(func() []string {
		var s []string
		for _, v := range enum[:enumShown] {
			s = append(s, v.(string))
		}
		return s
	}(), ", ") + ")" +
		"\nParameter unit: Temperature unit (one of: celsius, fahrenheit)" +
		"\nExample: fly to Oslo"
	if got != want {
		t.Errorf("retrieval details\n%s\nwant\n%s", got, want)
	}
	for _, raw := range []string{`[1,2]`, `{"type":"object","properties":[]}`, `{"properties":{"a":"not a schema"}}`, `not json`} {
		def.Parameters = json.RawMessage(raw)
		def.Tags, def.Examples = nil, nil
		if got := retrievalDetails(&def); got != "" && got != "\nParameter a" {
			t.Errorf("parameters %s: %q", raw, got)
		}
	}
}
