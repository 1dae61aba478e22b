package selection

import (
	"context"
	"testing"
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
