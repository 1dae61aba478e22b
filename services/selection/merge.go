package selection

import (
	"cmp"
	"context"
	"slices"
)

// rankedIntent is one intent of a task as a selection ranked it: its text
// and the best score any tool had for it.
type rankedIntent struct {
	text string
	best float64
}

// rank scores the allowed entries for a task and returns the best limit
// of them: rankTask without the intents.
func (s *Selector) rank(ctx context.Context, ix *index, t task, in scope, limit int) []rankedTool {
	ranked, _ := s.rankTask(ctx, ix, t, in, limit)
	return ranked
}

// rankTask ranks the task as a whole (rankText) and, when its focus has
// several intents (intents.go), each intent on its own, with the task's
// context as its context; then it merges the rankings so that every
// intent keeps its best tools before any gets its second best, the whole
// task's ranking first in each round (mergeRankings). A task of one intent
// ranks as a whole only. The tools are those scoring in.minScore or more,
// then, when fewer than limit, the whole task's others (without reasons),
// so the caller sees the best score even when none passes.
func (s *Selector) rankTask(ctx context.Context, ix *index, t task, in scope, limit int) ([]rankedTool, []rankedIntent) {
	intents := intentsOf(t.focus, ix.acts(s.tok))
	if len(intents) < 2 {
		return s.rankText(ctx, ix, t, in, limit), nil
	}
	if !s.cfg.local {
		// One request to the model for the focus and every intent, not one
		// each.
		texts := []string{t.focus}
		for _, it := range intents {
			texts = append(texts, it.text)
		}
		s.embedQueries(ctx, texts)
	}
	whole := s.rankText(ctx, ix, t, in, limit)
	per := make([][]rankedTool, len(intents))
	parts := make([]rankedIntent, len(intents))
	for k, it := range intents {
		per[k] = s.rankText(ctx, ix, task{focus: it.text, context: t.context}, in, limit)
		parts[k].text = it.text
		if len(per[k]) > 0 {
			parts[k].best = per[k][0].score
		}
	}
	return mergeRankings(whole, per, s.cfg.tune.intentFloor, in.minScore, limit), parts
}

// mergeRankings merges a task's ranking (whole) with its intents' (per,
// in the text's order), limit tools in all, in rounds: each round takes
// the best tool not yet taken from the whole task's ranking, then from
// each intent's, the intents whose best tool scores highest first, the
// tool of the intent's own rank for that round; that tool already taken,
// the intent gives none that round (an intent whose best tool the whole
// ranking gave does not take its second in its place). An intent's
// ranking gives only tools scoring floor or more. So every intent has its
// best tool before any has its second, and a task that asks for one thing
// (which the cut may still split) keeps the whole ranking's best tools in
// front. Only tools scoring minScore or more are taken; the whole
// ranking's others follow while there is room.
//
// Each tool says which intent it answers: the one whose ranking places it
// highest (the higher score on a tie), none when no intent's does. It
// carries that ranking's reasons (the whole task's when no intent ranks
// it) and the higher of its scores there and in the whole task's.
func mergeRankings(whole []rankedTool, per [][]rankedTool, floor, minScore float64, limit int) []rankedTool {
	type place struct {
		intent, pos int
		tool        rankedTool
	}
	answers := map[int]place{}
	for k, list := range per {
		for pos, r := range list {
			if r.score < minScore {
				break
			}
			if p, ok := answers[r.entry]; !ok || pos < p.pos || pos == p.pos && r.score > p.tool.score {
				answers[r.entry] = place{intent: k, pos: pos, tool: r}
			}
		}
	}
	wholeOf := make(map[int]rankedTool, len(whole))
	for _, r := range whole {
		wholeOf[r.entry] = r
	}
	streams := [][]rankedTool{whole}
	byBest := make([]int, 0, len(per))
	for k, list := range per {
		// An intent keeps only the tools that match it well: a sentence of
		// context ("I'm starting a new blog.") matches something weakly,
		// and those tools would push the whole task's out.
		cut := 0
		for cut < len(list) && list[cut].score >= max(floor, minScore) {
			cut++
		}
		if per[k] = list[:cut]; cut > 0 {
			byBest = append(byBest, k)
		}
	}
	slices.SortStableFunc(byBest, func(a, b int) int { return cmp.Compare(per[b][0].score, per[a][0].score) })
	for _, k := range byBest {
		streams = append(streams, per[k])
	}
	taken := map[int]bool{}
	next := make([]int, len(streams))
	out := make([]rankedTool, 0, limit)
	for len(out) < limit {
		took := false
		for si, list := range streams {
			if si > 0 {
				// An intent offers its next tool in its own order, and
				// nothing this round when the whole task's ranking (or
				// another intent) took that tool: it is answered already.
				if next[si] < len(list) && taken[list[next[si]].entry] {
					next[si]++
					took = true // the next round offers its next
					continue
				}
			} else {
				for next[si] < len(list) && (taken[list[next[si]].entry] || list[next[si]].score < minScore) {
					next[si]++
				}
			}
			if next[si] == len(list) || len(out) == limit {
				continue
			}
			e := list[next[si]].entry
			next[si]++
			taken[e], took = true, true
			r := wholeOf[e]
			if p, ok := answers[e]; ok {
				score := max(r.score, p.tool.score)
				r = p.tool
				r.score, r.intent = score, p.intent+1
			}
			out = append(out, r)
		}
		if !took {
			break
		}
	}
	for _, r := range whole {
		if len(out) < limit && r.score < minScore {
			out = append(out, r)
		}
	}
	return out
}
