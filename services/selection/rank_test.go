package selection

import (
	"context"
	"testing"

	"toolbelt/models"
	"toolbelt/services/catalog"
	"toolbelt/services/embed"
)

// TestRankForgetsFilteredScores: a ranking for a caller who may not see a
// tool leaves nothing behind in the pooled buffers, so the next ranking,
// for a caller who may, finds the tool as before (a lexical score left
// over kept it out of the next caller's matches: "run a python snippet"
// scored 0.01 under load).
func TestRankForgetsFilteredScores(t *testing.T) {
	s := memSelector(t, 500)
	ix := s.idx.Load()
	ctx := context.Background()
	all := func(*entry) bool { return true }
	checked := 0
	for _, q := range SyntheticQueries(20, 3) {
		want := s.rank(ctx, ix, task{focus: q}, all, 5)
		if len(want) == 0 {
			continue
		}
		checked++
		top := want[0].entry
		s.rank(ctx, ix, task{focus: q}, func(e *entry) bool { return e != ix.entries[top] }, 5)
		got := s.rank(ctx, ix, task{focus: q}, all, 5)
		if len(got) != len(want) || got[0].entry != top || got[0].score != want[0].score {
			t.Fatalf("%q: after a filtered ranking the top is %v, was %v", q, got, want)
		}
	}
	if checked < 10 {
		t.Fatalf("only %d of 20 queries found a tool: the test proves nothing", checked)
	}
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
