package selection

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"toolbelt/models/modelstest"
	"toolbelt/services/access"
	"toolbelt/services/catalog"
	"toolbelt/services/embed"
)

// ranking is a ranking of the tools numbered by entry, scores in order.
func ranking(entries []int, scores ...float64) []rankedTool {
	out := make([]rankedTool, len(entries))
	for i, e := range entries {
		out[i] = rankedTool{entry: e, score: scores[i]}
	}
	return out
}

func entriesOf(rs []rankedTool) []int {
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = r.entry
	}
	return out
}

// TestMergeRankings: every intent gets its best tool before any gets its
// second, the whole task's ranking first in each round and the strongest
// intent next; an intent whose tool of a round was taken already gives
// none that round; an intent matching nothing well gets no place; the whole
// ranking's tools under min_score come last; each tool says the intent
// that ranks it highest.
func TestMergeRankings(t *testing.T) {
	whole := ranking([]int{1, 2, 3, 4, 5, 99}, 0.9, 0.8, 0.7, 0.6, 0.55, 0.01)
	per := [][]rankedTool{
		ranking([]int{20, 21, 22}, 0.6, 0.55, 0.52), // intent 1: weaker than intent 2
		ranking([]int{10, 1, 11}, 0.8, 0.75, 0.51),  // intent 2: its second is the whole's first
		ranking([]int{30, 31}, 0.45, 0.4),           // intent 3: under the floor, context
	}
	per[1][1].reasons.MatchedTerms = []string{"from intent 2"}
	got := mergeRankings(whole, per, 0.5, 0.05, 8)
	// Round 2: intent 2's second is 1, taken in round 1, so it gives
	// nothing; its third, 11, comes in round 3.
	want := []int{1, 10, 20, 2, 21, 3, 11, 22}
	if e := entriesOf(got); !slices.Equal(e, want) {
		t.Fatalf("merged %v, want %v", e, want)
	}
	intentOf := map[int]int{}
	for _, r := range got {
		intentOf[r.entry] = r.intent
	}
	// 1 is intent 2's second best and no other intent's; 2 no intent's.
	wantIntent := map[int]int{1: 2, 10: 2, 11: 2, 20: 1, 21: 1, 22: 1, 2: 0, 3: 0}
	for e, k := range wantIntent {
		if intentOf[e] != k {
			t.Errorf("tool %d answers intent %d, want %d", e, intentOf[e], k)
		}
	}
	// The whole task's score is kept where it is higher (0.9 against
	// 0.75); the reasons are those of the intent the tool answers.
	if got[0].score != 0.9 || !slices.Equal(got[0].reasons.MatchedTerms, []string{"from intent 2"}) {
		t.Errorf("tool 1 scores %v with reasons %+v, want the whole task's 0.9 and intent 2's reasons", got[0].score, got[0].reasons)
	}

	// An intent whose tool of a round was taken gives its next one in the
	// next round, after the whole ranking has run out too.
	if e := entriesOf(mergeRankings(ranking([]int{1}, 0.9), [][]rankedTool{ranking([]int{1, 5, 6}, 0.9, 0.8, 0.7)}, 0.5, 0.05, 5)); !slices.Equal(e, []int{1, 5, 6}) {
		t.Errorf("merged %v, want [1 5 6]", e)
	}

	// With room for all, the under-min_score tool of the whole ranking
	// comes last and the intent under the floor has no place.
	all := mergeRankings(whole, [][]rankedTool{per[0], per[1], per[2]}, 0.5, 0.05, 20)
	e := entriesOf(all)
	if e[len(e)-1] != 99 || slices.Contains(e, 30) || slices.Contains(e, 31) {
		t.Errorf("merged %v: want 99 last and neither 30 nor 31", e)
	}
	if n := len(e); n != 11 {
		t.Errorf("%d tools, want 11 (5 + 1 of the whole, 3 + 2 more of the intents)", n)
	}
}

// TestMergeKeepsEachIntentsBest: whatever the limit, the first 1 + k tools
// are the whole task's best and each intent's best (k intents with a
// tool over the floor), so a selection as short as that covers every
// intent.
func TestMergeKeepsEachIntentsBest(t *testing.T) {
	whole := ranking([]int{1, 2, 3, 4, 5, 6, 7, 8}, 0.9, 0.88, 0.86, 0.84, 0.82, 0.8, 0.78, 0.76)
	per := [][]rankedTool{
		ranking([]int{2, 40}, 0.7, 0.6), // its best is the whole's second
		ranking([]int{50, 51}, 0.55, 0.54),
		ranking([]int{60, 61}, 0.95, 0.9),
	}
	for limit := 1; limit <= 8; limit++ {
		got := entriesOf(mergeRankings(whole, per, 0.5, 0.05, limit))
		want := []int{1, 60, 2, 50}[:min(limit, 4)]
		if !slices.Equal(got[:min(limit, 4)], want) {
			t.Errorf("limit %d: %v, want it to open with %v", limit, got, want)
		}
	}
}

// TestSelectCoversEveryIntent: a task asking for three things, in a
// catalog where one of them has many tools sharing its words, gets a tool
// for each within three, each saying which part of the task it answers;
// the selection lists the parts and the task's words no tool holds. The
// whole task's ranking alone gives the flights' tools all three places.
func TestSelectCoversEveryIntent(t *testing.T) {
	ctx := context.Background()
	store, _ := modelstest.Store(t)
	authz, err := access.OpenAuthz(ctx, access.AuthzDeps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	reg := catalog.NewRegistry(store, quiet)
	for name, desc := range map[string]string{
		"find_flights":       "Find flights to a city on a date: the flights, their times and their price.",
		"find_cheap_flights": "Find the cheapest flights to a city and their price in the airline's currency.",
		"flight_status":      "Tell the status of a flight: on time, delayed, or cancelled.",
		"book_flight":        "Book a seat on one of the flights to a city.",
		"convert_currency":   "Convert an amount of money from one currency to another, such as dollars to euros.",
		"add_calendar_event": "Add an event to the user's calendar at a date and time.",
		"add_contact":        "Add a person to the user's address book.",
		"convert_units":      "Convert a length, weight or volume from one unit to another.",
		"weather_now":        "Tell the current weather of a city: temperature, wind and rain.",
	} {
		if _, err := reg.Register(ctx, testTool(name, desc), nil); err != nil {
			t.Fatal(err)
		}
	}
	s := New(Deps{Store: store, Authz: authz, Embedder: embed.NewBuiltin(), Host: allHost(), Log: quiet})
	running(t, s.Run)
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	task := "Find the flights to Rome and their price, convert the price to euros and add the zorblax trip to my calendar"
	ix := s.catalog.snapshot.Load()
	var wholeOnly []string
	for _, r := range s.rankText(ctx, ix, taskFor(task), scope{vis: visibility{all: true}, minScore: DefaultMinScore}, 3) {
		wholeOnly = append(wholeOnly, ix.entries[r.entry].name)
	}
	if slices.Contains(wholeOnly, "convert_currency") && slices.Contains(wholeOnly, "add_calendar_event") {
		t.Fatalf("the whole task's ranking alone already covers the task (%v): the test proves nothing", wholeOnly)
	}

	// The whole task's best and each intent's best: four places.
	res, err := s.Select(ctx, nil, SelectRequest{Query: task, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	answers := map[string]string{}
	for _, tl := range res.Tools {
		answers[tl.Name] = tl.Reasons.Intent
	}
	want := map[string]string{
		"find_flights":       "Find the flights to Rome and their price,",
		"convert_currency":   "convert the price to euros",
		"add_calendar_event": "and add the zorblax trip to my calendar",
	}
	for name, intent := range want {
		if got, ok := answers[name]; !ok || got != intent {
			t.Errorf("%s answers %q (selected: %t), want %q; selection %v", name, got, ok, intent, answers)
		}
	}
	if len(res.Intents) != 3 {
		t.Fatalf("intents %+v, want 3", res.Intents)
	}
	for _, it := range res.Intents {
		if len(it.Tools) == 0 || it.BestScore < GoodMatchScore || !slices.ContainsFunc(it.Tools, func(n string) bool { return want[n] == it.Text }) {
			t.Errorf("intent %+v: want its tool, scoring well", it)
		}
	}
	for _, tl := range res.Tools {
		if len(tl.Reasons.MatchedTerms) == 0 {
			t.Errorf("%s matched no words of its intent", tl.Name)
		}
		for _, w := range tl.Reasons.MatchedTerms {
			if !strings.Contains(strings.ToLower(tl.Reasons.Intent), w) {
				t.Errorf("%s matched %q, not a word of its intent %q", tl.Name, w, tl.Reasons.Intent)
			}
		}
	}
	if !slices.Equal(res.UnmatchedTerms, []string{"rome", "zorblax", "trip"}) {
		t.Errorf("unmatched terms %q, want rome, zorblax and trip", res.UnmatchedTerms)
	}

	// A task asking for one thing has no intents, and its tools say none;
	// a number is a value, not a word a tool could hold.
	one, err := s.Select(ctx, nil, SelectRequest{Query: "convert 20 dollars to euros", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Intents) != 0 || len(one.Tools) == 0 || one.Tools[0].Name != "convert_currency" || one.Tools[0].Reasons.Intent != "" {
		t.Errorf("one request: intents %+v, tools %+v", one.Intents, one.Tools)
	}
	if len(one.UnmatchedTerms) != 0 {
		t.Errorf("one request: unmatched %q, want none", one.UnmatchedTerms)
	}
}

// taskFor is the task a query alone makes.
func taskFor(query string) task {
	t, _ := taskOf(query, nil)
	return t
}

// callCounter is a remote model's stand-in that counts its query
// requests.
type callCounter struct {
	flakyEmbedder
	queryCalls atomic.Int64
}

func (c *callCounter) Embed(ctx context.Context, kind embed.Kind, texts []string) ([][]float32, error) {
	if kind == embed.Query {
		c.queryCalls.Add(1)
	}
	return c.flakyEmbedder.Embed(ctx, kind, texts)
}

// TestIntentsEmbedInOneRequest: under a remote model, a task of several
// intents costs one request for its focus and its intents; when the model
// is down the selection still answers, lexically, with its intents, and
// the selector backs off instead of asking once per intent.
func TestIntentsEmbedInOneRequest(t *testing.T) {
	ctx := context.Background()
	store, authz := catalogFixture(t, 0)
	c := &callCounter{flakyEmbedder: flakyEmbedder{countingEmbedder: countingEmbedder{model: "test/remote", inner: embed.NewBuiltin()}}}
	s := newFixtureSelector(t, store, authz, c, 0)
	task := "Read the file config.yaml from the disk. Then search the web for the latest Go release notes. Finally run a python snippet that computes primes."
	res, err := s.Select(ctx, nil, SelectRequest{Query: task, Limit: 6})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Intents) != 3 {
		t.Fatalf("intents %+v, want 3", res.Intents)
	}
	if n := c.queryCalls.Load(); n != 1 {
		t.Errorf("%d query requests for a task of 3 intents, want 1", n)
	}

	c.down.Store(true)
	c.queryCalls.Store(0)
	res, err = s.Select(ctx, nil, SelectRequest{Query: strings.Replace(task, "primes", "prime numbers", 1), Limit: 6})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Intents) != 3 || len(res.Tools) == 0 || !s.EmbedFailing() {
		t.Errorf("model down: intents %d, tools %d, failing %v", len(res.Intents), len(res.Tools), s.EmbedFailing())
	}
	if n := c.queryCalls.Load(); n != 1 {
		t.Errorf("%d query requests while the model is down, want 1 (then the selector backs off)", n)
	}
}
