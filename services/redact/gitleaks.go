package redact

import (
	"math"
	"strings"

	ahocorasick "github.com/BobuSumisu/aho-corasick"
	"github.com/zricethezav/gitleaks/v8/config"
)

// finding is one secret a rule found in a text: what gitleaks' detector
// reports for it when it scans a plain string.
type finding struct {
	RuleID                 string
	Match, Secret, Line    string
	StartLine, EndLine     int
	StartColumn, EndColumn int
	Entropy                float32
}

// matcher applies gitleaks' configured rules to a string as gitleaks'
// detector does with DetectString and NewDetector's defaults (no file path
// or commit, no size limit, MaxDecodeDepth 0 so no decoding pass, the
// gitleaks:allow comment honoured), without the detector itself: that
// package registers every archive format, a terminal UI and some 55 more
// modules for scanning repositories, none of which a string needs.
// matcher_test.go compares the two on the corpus, on samples of every rule
// and under a fuzzer. Safe for concurrent use.
type matcher struct {
	cfg config.Config
	// prefilter holds every rule keyword, lowercased: a rule with keywords
	// runs only on text holding one of them.
	prefilter *ahocorasick.Trie
	rules     []matcherRule
}

type matcherRule struct {
	*config.Rule
	generic bool // a "generic" rule gives way to a specific one (filter)
}

const gitleaksAllowSignature = "gitleaks:allow"

func newMatcher(cfg config.Config) *matcher {
	m := &matcher{cfg: cfg}
	kws := make([]string, 0, len(cfg.Keywords))
	for k := range cfg.Keywords {
		kws = append(kws, k)
	}
	m.prefilter = ahocorasick.NewTrieBuilder().AddStrings(kws).Build()
	// Rules in the configured order: gitleaks runs them in map order, and
	// the findings it returns are a set (see filter).
	ids := cfg.OrderedRules
	if len(ids) != len(cfg.Rules) {
		ids = ids[:0:0]
		for id := range cfg.Rules {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		r, ok := cfg.Rules[id]
		if !ok {
			continue
		}
		rule := &r
		// A string has no file path: a rule with a path pattern that
		// the empty path does not match never reports.
		if rule.Path != nil && !rule.Path.MatchString("") {
			continue
		}
		m.rules = append(m.rules, matcherRule{Rule: rule, generic: strings.Contains(strings.ToLower(rule.RuleID), "generic")})
	}
	return m
}

// find returns what gitleaks' Detector.DetectString returns for s.
func (m *matcher) find(s string) []finding {
	keywords := map[string]bool{}
	lower := strings.ToLower(s)
	for _, k := range m.prefilter.MatchString(lower) {
		keywords[lower[k.Pos():int(k.Pos())+len(k.Match())]] = true
	}
	var (
		out      []finding
		newlines [][]int // of s, computed once a rule matches
	)
	for i := range m.rules {
		r := &m.rules[i]
		if !r.wanted(keywords) {
			continue
		}
		out = m.applyRule(out, s, r.Rule, false, &newlines)
	}
	return m.filter(out)
}

func (r *matcherRule) wanted(keywords map[string]bool) bool {
	if len(r.Keywords) == 0 {
		return true
	}
	for _, k := range r.Keywords {
		if keywords[strings.ToLower(k)] {
			return true
		}
	}
	return false
}

// applyRule appends the findings of rule r in s (gitleaks' detectRule on a
// fragment holding only s; inherited marks a run for another rule's
// required rules).
func (m *matcher) applyRule(out []finding, s string, r *config.Rule, inherited bool, newlines *[][]int) []finding {
	if r.SkipReport && !inherited {
		return out
	}
	if r.Path != nil {
		// A string's path is empty.
		if !r.Path.MatchString("") {
			return out
		}
		if r.Regex == nil {
			return append(out, finding{RuleID: r.RuleID, Match: "file detected: "})
		}
	}
	if r.Regex == nil {
		return out
	}
	matches := r.Regex.FindAllStringIndex(s, -1)
	if len(matches) == 0 {
		return out
	}
	if *newlines == nil {
		*newlines = newlineIndices(s)
	}
	first := len(out)
	for _, mi := range matches {
		secret := strings.Trim(s[mi[0]:mi[1]], "\n")
		// gitleaks moves the end, not the start, when it trims a match.
		start, end := mi[0], mi[0]+len(secret)
		loc := location(*newlines, s, start, end)
		if end > loc.endLineIndex {
			loc.endLineIndex = end
		}
		f := finding{
			RuleID:      r.RuleID,
			StartLine:   loc.startLine,
			EndLine:     loc.endLine,
			StartColumn: loc.startColumn,
			EndColumn:   loc.endColumn,
			Line:        s[loc.startLineIndex:loc.endLineIndex],
			Match:       secret,
			Secret:      secret,
		}
		if strings.Contains(f.Line, gitleaksAllowSignature) {
			continue
		}
		// The secret is the rule's secret group, else its first non-empty
		// group, of the match matched again on its own.
		if groups := r.Regex.FindStringSubmatch(f.Secret); len(groups) >= 2 {
			if r.SecretGroup > 0 {
				if len(groups) <= r.SecretGroup {
					continue
				}
				f.Secret = groups[r.SecretGroup]
			} else {
				for _, g := range groups[1:] {
					if g != "" {
						f.Secret = g
						break
					}
				}
			}
		}
		entropy := shannonEntropy(f.Secret)
		f.Entropy = float32(entropy)
		if r.Entropy != 0 && entropy <= r.Entropy {
			continue
		}
		if allowed(f, m.cfg.Allowlists) || allowed(f, r.Allowlists) {
			continue
		}
		out = append(out, f)
	}
	if inherited || len(r.RequiredRules) == 0 {
		return out
	}
	return append(out[:first], m.required(out[first:], s, r, newlines)...)
}

// required keeps the findings of a multi-part rule that have, near them, a
// finding of each of its required rules.
func (m *matcher) required(primary []finding, s string, r *config.Rule, newlines *[][]int) []finding {
	if len(primary) == 0 {
		return nil
	}
	found := map[string][]finding{}
	for _, req := range r.RequiredRules {
		rule, ok := m.cfg.Rules[req.RuleID]
		if !ok {
			continue
		}
		found[req.RuleID] = m.applyRule(nil, s, &rule, true, newlines)
	}
	var kept []finding
	for _, p := range primary {
		have := map[string]bool{}
		for _, req := range r.RequiredRules {
			for _, f := range found[req.RuleID] {
				if withinProximity(p, f, req) {
					have[f.RuleID] = true
				}
			}
		}
		all := len(have) > 0
		for _, req := range r.RequiredRules {
			all = all && have[req.RuleID]
		}
		if all {
			kept = append(kept, p)
		}
	}
	return kept
}

func withinProximity(p, f finding, req *config.Required) bool {
	if req.WithinLines != nil && abs(p.StartLine-f.StartLine) > *req.WithinLines {
		return false
	}
	if req.WithinColumns != nil && abs(p.StartColumn-f.StartColumn) > *req.WithinColumns {
		return false
	}
	return true
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// allowed reports whether one of the allowlists excuses f. A string has no
// path or commit, so an AND allowlist that lists either never does.
func allowed(f finding, allowlists []*config.Allowlist) bool {
	for _, a := range allowlists {
		target := f.Secret
		switch a.RegexTarget {
		case "match":
			target = f.Match
		case "line":
			target = f.Line
		}
		regexAllowed := a.RegexAllowed(target)
		stopword, _ := a.ContainsStopWord(f.Secret)
		if a.MatchCondition != config.AllowlistMatchAnd {
			if regexAllowed || stopword {
				return true
			}
			continue
		}
		ok := true
		if len(a.Commits) > 0 || len(a.Paths) > 0 {
			ok = false
		}
		if len(a.Regexes) > 0 {
			ok = ok && regexAllowed
		}
		if len(a.StopWords) > 0 {
			ok = ok && stopword
		}
		if ok {
			return true
		}
	}
	return false
}

// filter drops a generic rule's finding that a specific rule's finding on
// the same line holds.
func (m *matcher) filter(fs []finding) []finding {
	var out []finding
	for _, f := range fs {
		keep := true
		if strings.Contains(strings.ToLower(f.RuleID), "generic") {
			for _, g := range fs {
				if f.StartLine == g.StartLine && f.RuleID != g.RuleID &&
					strings.Contains(g.Secret, f.Secret) &&
					!strings.Contains(strings.ToLower(g.RuleID), "generic") {
					keep = false
					break
				}
			}
		}
		if keep {
			out = append(out, f)
		}
	}
	return out
}

// shannonEntropy is gitleaks' measure: bits per character, counting
// characters as runes but dividing by the length in bytes.
func shannonEntropy(data string) (entropy float64) {
	if data == "" {
		return 0
	}
	counts := make(map[rune]int)
	for _, c := range data {
		counts[c]++
	}
	inv := 1.0 / float64(len(data))
	for _, n := range counts {
		freq := float64(n) * inv
		entropy -= freq * math.Log2(freq)
	}
	return entropy
}

func newlineIndices(s string) [][]int {
	idx := [][]int{}
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			idx = append(idx, []int{i, i + 1})
		}
	}
	return idx
}

type span struct {
	startLine, endLine, startColumn, endColumn int
	startLineIndex, endLineIndex               int
}

// location is gitleaks' location of [start, end) in raw, quirks included:
// a line's text starts at the line break before it, and lines count from 0.
func location(newlines [][]int, raw string, start, end int) span {
	var (
		prev    int
		loc     span
		lineSet bool
		lineNum int
	)
	if len(newlines) == 0 {
		newlines = [][]int{{len(raw), len(raw) + 1}}
	}
	for n, pair := range newlines {
		lineNum = n
		nl := pair[0]
		if prev <= start && start < nl {
			lineSet = true
			loc.startLine, loc.endLine = n, n
			loc.startColumn = start - prev + 1
			loc.startLineIndex = prev
			loc.endLineIndex = nl
		}
		if prev < end && end <= nl {
			loc.endLine = n
			loc.endColumn = end - prev
			loc.endLineIndex = nl
		}
		prev = nl
	}
	if !lineSet {
		loc.startColumn = start - prev + 1
		loc.endColumn = end - prev
		loc.startLine, loc.endLine = lineNum+1, lineNum+1
		i := 0
		for end+i < len(raw) && raw[end+i] != '\n' && raw[end+i] != '\r' {
			i++
		}
		loc.endLineIndex = end + i
	}
	return loc
}
