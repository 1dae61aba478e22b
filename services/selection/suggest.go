package selection

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agnivade/levenshtein"

	"toolbelt/models"
	"toolbelt/services/embed"
	"toolbelt/services/tooldef"
)

// Suggest returns the real tools closest to a name that does not exist: a
// widened search (top 40) on the session's last query, merged with the
// tools whose names are most alike. An LLM that invented a tool name can
// retry with one of these.
func (s *Selector) Suggest(ctx context.Context, caller *models.Principal, sessionID, name string, max int) ([]string, error) {
	if err := s.ensureFresh(ctx); err != nil {
		return nil, err
	}
	vis, err := s.visibilityOf(caller)
	if err != nil {
		return nil, err
	}
	ix := s.catalog.snapshot.Load()
	allowed := scope{vis: vis}
	score := map[int]float64{}
	if sessionID != "" {
		if sel, err := s.recorder.lastOf(ctx, sessionID, time.Now().UTC()); err == nil {
			for r, hit := range s.rank(ctx, ix, task{focus: sel.Query}, allowed, 40) {
				score[hit.entry] += 1.0 / float64(10+r)
			}
		}
	}
	// The invented name is a small query too: "read_file" finds file_read.
	// Only tools a selection would return count: a name of words the
	// catalog does not hold ("../etc/passwd") is no evidence, though the
	// word vectors find every tool a little like it.
	for r, hit := range s.rank(ctx, ix, task{focus: strings.Join(embed.Words(name), " ")}, allowed, 40) {
		if hit.score >= DefaultMinScore {
			score[hit.entry] += 0.5 / float64(10+r)
		}
	}
	for i, e := range ix.entries {
		if !e.runnable || !vis.allows(e) {
			continue
		}
		if sim := nameSimilarity(name, e.name); sim > 0.5 {
			score[i] += sim * 0.2
		}
	}
	order := make([]int, 0, len(score))
	for i := range score {
		order = append(order, i)
	}
	sort.Slice(order, func(a, b int) bool {
		if score[order[a]] != score[order[b]] {
			return score[order[a]] > score[order[b]]
		}
		return ix.entries[order[a]].name < ix.entries[order[b]].name
	})
	out := []string{}
	for _, i := range order[:min(max, len(order))] {
		out = append(out, ix.entries[i].name)
	}
	return out, nil
}

// UnknownToolError is a tool name that does not exist, with the real tools
// closest to it. It matches models.ErrNotFound.
type UnknownToolError struct {
	Name        string
	Suggestions []string
}

func (e *UnknownToolError) Error() string {
	msg := fmt.Sprintf("tool %q does not exist", e.Name)
	if len(e.Suggestions) > 0 {
		msg += "; did you mean " + strings.Join(e.Suggestions, ", ") + "?"
	}
	return msg
}

// Is makes errors.Is(err, models.ErrNotFound) true.
func (e *UnknownToolError) Is(target error) bool { return target == models.ErrNotFound }

// ExplainUnknown turns a not-found error for a tool that was never
// registered into an UnknownToolError with suggestions; other errors (a
// retired tool, a bad name) pass unchanged.
func (s *Selector) ExplainUnknown(ctx context.Context, caller *models.Principal, sessionID, name string, err error) error {
	if !errors.Is(err, models.ErrNotFound) || !tooldef.NamePattern.MatchString(name) {
		return err
	}
	if _, _, lookErr := s.store.ToolByName(ctx, name, true); lookErr == nil || !errors.Is(lookErr, models.ErrNotFound) {
		return err
	}
	sug, sErr := s.Suggest(ctx, caller, sessionID, name, 5)
	if sErr != nil {
		return err
	}
	return &UnknownToolError{Name: name, Suggestions: sug}
}

// nameSimilarity is 1 minus the normalized Levenshtein distance of two
// names, after sorting their words so "read_file" is close to "file_read".
func nameSimilarity(a, b string) float64 {
	norm := func(s string) string {
		w := embed.Words(s)
		slices.Sort(w)
		return strings.Join(w, " ")
	}
	a, b = norm(a), norm(b)
	if a == "" || b == "" {
		return 0
	}
	d := levenshtein.ComputeDistance(a, b)
	return 1 - float64(d)/float64(max(utf8.RuneCountInString(a), utf8.RuneCountInString(b)))
}
