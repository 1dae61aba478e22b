package mcpserver

import (
	"testing"

	"toolbelt/services/selection"
)

// TestReason: search_tools says which part of a task of several a tool
// answers, before what it matched.
func TestReason(t *testing.T) {
	for _, c := range []struct {
		r    selection.Reasons
		want string
	}{
		{selection.Reasons{}, "related to the task"},
		{selection.Reasons{MatchedTerms: []string{"convert", "euros"}, LexicalRank: 1}, "matches convert, euros; lexical rank 1"},
		{selection.Reasons{Intent: "convert the price to euros", MatchedTerms: []string{"convert"}}, `answers "convert the price to euros"; matches convert`},
	} {
		if got := reason(c.r); got != c.want {
			t.Errorf("reason(%+v) = %q, want %q", c.r, got, c.want)
		}
	}
}
