package redact

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/zricethezav/gitleaks/v8/config"
	"github.com/zricethezav/gitleaks/v8/detect"
)

// The tests here prove the matcher equal to gitleaks' own detector, which
// only they import (the server must not: see TestServerLeavesDetectOut).

// TestServerLeavesDetectOut: the server does not link gitleaks' detect
// package (issue 28: it pulls some 55 modules and 6 MB into the binary).
// Its decoder, detect/codec, needs nothing the rules do not.
func TestServerLeavesDetectOut(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "toolbelt").CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v: %s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "github.com/zricethezav/gitleaks/v8/detect" || p == "github.com/charmbracelet/lipgloss" {
			t.Errorf("the server imports %s", p)
		}
	}
}

var (
	detectorOnce sync.Once
	detector     *detect.Detector
)

// gitleaksDetector returns gitleaks' detector over the configuration
// Redactor uses, as the server built it before the matcher.
func gitleaksDetector(t testing.TB) *detect.Detector {
	t.Helper()
	if _, err := New(nil); err != nil {
		t.Fatal(err)
	}
	detectorOnce.Do(func() { detector = detect.NewDetector(gitleaksCfg) })
	return detector
}

// detectorFind is gitleaks' DetectString in the matcher's terms.
func detectorFind(d *detect.Detector) func(string) []finding {
	return func(s string) []finding {
		var out []finding
		for _, f := range d.DetectString(s) {
			out = append(out, finding{
				RuleID: f.RuleID, Match: f.Match, Secret: f.Secret, Line: f.Line,
				StartLine: f.StartLine, EndLine: f.EndLine, StartColumn: f.StartColumn, EndColumn: f.EndColumn,
				Entropy: f.Entropy,
			})
		}
		return out
	}
}

func sortFindings(fs []finding) []finding {
	fs = slices.Clone(fs)
	slices.SortFunc(fs, func(a, b finding) int {
		return cmp.Or(cmp.Compare(a.RuleID, b.RuleID), cmp.Compare(a.StartLine, b.StartLine),
			cmp.Compare(a.StartColumn, b.StartColumn), cmp.Compare(a.EndColumn, b.EndColumn),
			cmp.Compare(a.Secret, b.Secret), cmp.Compare(a.Match, b.Match), cmp.Compare(a.Line, b.Line))
	})
	return fs
}

// sameFindings reports where the matcher and the detector disagree on s:
// rule, secret, match, line, start and end, entropy.
func sameFindings(m *matcher, d *detect.Detector, s string) (got, want []finding, ok bool) {
	got = sortFindings(m.find(s))
	want = sortFindings(detectorFind(d)(s))
	return got, want, slices.Equal(got, want)
}

func checkSame(t *testing.T, m *matcher, d *detect.Detector, name, s string) int {
	t.Helper()
	got, want, ok := sameFindings(m, d, s)
	if !ok {
		t.Errorf("%s: %q\nmatcher:  %+v\ndetector: %+v", name, s, got, want)
	}
	return len(want)
}

// TestMatcherCorpus: on every example of testdata/secrets, in every
// context redact_corpus_test.go puts it in and in the character view Redact
// also scans, the matcher finds what gitleaks' detector finds.
func TestMatcherCorpus(t *testing.T) {
	d := gitleaksDetector(t)
	m := gitleaksMatcher
	examples := append(loadSecretExamples(t, true), loadSecretExamples(t, false)...)
	full := os.Getenv("REDACT_MATCHER_FULL") != ""
	if raceEnabled && !full {
		examples = everyNth(examples, 32)
	}
	texts, found := 0, 0
	for i, e := range examples {
		secret := ""
		if e.TP {
			secret = e.Secrets[0]
		}
		for j, ctx := range secretContexts {
			// Each example plain and in one other context in turn; every
			// context with REDACT_MATCHER_FULL=1 (some two minutes).
			if ctx.tpOnly && !e.TP || !full && j != 0 && j != 1+i%(len(secretContexts)-1) {
				continue
			}
			in := ctx.wrap(e.Text, secret)
			texts++
			found += checkSame(t, m, d, e.Rule+"/"+ctx.name, in)
			if v := newPlainView(in).text; v != in {
				texts++
				found += checkSame(t, m, d, e.Rule+"/"+ctx.name+"/view", v)
			}
		}
	}
	t.Logf("%d examples, %d texts, %d findings, all equal", len(examples), texts, found)
	if found == 0 {
		t.Fatal("no findings compared")
	}
}

// TestMatcherRedactsAsDetector: Redact and RedactJSON give the same output
// over the matcher as over gitleaks' detector, on the corpus.
func TestMatcherRedactsAsDetector(t *testing.T) {
	r, old := redactors(t)
	examples := everyNth(loadSecretExamples(t, true), 2)
	if raceEnabled {
		examples = everyNth(examples, 16)
	}
	// Two rules may find one secret: gitleaks returns the findings in map
	// order, so which rule's name the old redactor's mark bore was chance.
	// The matcher keeps the configured order; the marks compare unnamed.
	unnamed := regexp.MustCompile(`\[REDACTED:[a-z0-9-]+\]`)
	same := func(a, b string) bool {
		return unnamed.ReplaceAllString(a, "[REDACTED]") == unnamed.ReplaceAllString(b, "[REDACTED]")
	}
	for i, e := range examples {
		for _, ctx := range []secretContext{secretContexts[0], secretContexts[1+i%5]} {
			in := ctx.wrap(e.Text, "")
			if got, want := r.Redact(in), old.Redact(in); !same(got, want) {
				t.Errorf("Redact(%q)\n= %q\nwant %q", in, got, want)
			}
			raw := []byte(fmt.Sprintf(`{"content":%q}`, in))
			if got, want := r.RedactJSON(raw), old.RedactJSON(raw); !same(string(got), string(want)) {
				t.Errorf("RedactJSON(%s)\n= %s\nwant %s", raw, got, want)
			}
		}
	}
}

// BenchmarkRedactJSONDetector is BenchmarkRedactJSON over gitleaks'
// detector, as Redact ran before the matcher: run both for the comparison.
func BenchmarkRedactJSONDetector(b *testing.B) {
	_, old := redactors(b)
	benchRedactJSON(b, old)
}

// redactors returns a Redactor over the matcher and the same over
// gitleaks' detector.
func redactors(t testing.TB) (r, old *Redactor) {
	t.Helper()
	r, err := New([]string{"configured-secret-value"})
	if err != nil {
		t.Fatal(err)
	}
	o := *r
	o.find = detectorFind(gitleaksDetector(t))
	return r, &o
}

// TestMatcherRuleSamples: on texts made from every rule's own regex (in
// several surroundings, with its keywords), the matcher finds what gitleaks'
// detector finds.
func TestMatcherRuleSamples(t *testing.T) {
	d := gitleaksDetector(t)
	m := gitleaksMatcher
	n := 40
	if raceEnabled || testing.Short() {
		n = 7
	}
	rng := rand.New(rand.NewPCG(28, 1))
	hit := map[string]bool{}
	total, found := 0, 0
	for _, id := range gitleaksCfg.OrderedRules {
		for _, s := range ruleSamples(t, gitleaksCfg.Rules[id], rng, n) {
			total++
			got, want, ok := sameFindings(m, d, s)
			if !ok {
				t.Errorf("%s: %q\nmatcher:  %+v\ndetector: %+v", id, s, got, want)
			}
			found += len(want)
			for _, f := range want {
				hit[f.RuleID] = true
			}
		}
	}
	var missed []string
	for _, id := range gitleaksCfg.OrderedRules {
		if !hit[id] {
			missed = append(missed, id)
		}
	}
	t.Logf("%d rules, %d samples, %d findings; %d rules found something; none in samples: %v",
		len(gitleaksCfg.OrderedRules), total, found, len(hit), missed)
	if len(hit) < len(gitleaksCfg.OrderedRules)*3/4 {
		t.Errorf("only %d of %d rules found anything in their samples", len(hit), len(gitleaksCfg.OrderedRules))
	}
}

// ruleSamples makes n texts holding a string generated from rule's regex:
// alone, after an assignment to one of its keywords, inside a log line,
// quoted in JSON, marked gitleaks:allow, and twice on two lines.
func ruleSamples(t testing.TB, rule config.Rule, rng *rand.Rand, n int) []string {
	if rule.Regex == nil {
		return []string{"plain text", ""}
	}
	re, err := syntax.Parse(rule.Regex.String(), syntax.Perl)
	if err != nil {
		t.Fatalf("%s: %v", rule.RuleID, err)
	}
	re = re.Simplify()
	kw := "key"
	if len(rule.Keywords) > 0 {
		kw = rule.Keywords[rng.IntN(len(rule.Keywords))]
	}
	var out []string
	for i := range n {
		var b strings.Builder
		genRegex(&b, re, rng, 0)
		s := b.String()
		switch i % 7 {
		case 0:
		case 1:
			s = kw + " = " + s
		case 2:
			s = "2026-11-30T10:02:11Z INFO " + kw + ": " + s + "\nnext line"
		case 3:
			s = fmt.Sprintf(`{"%s_token": %q}`, kw, s)
		case 4:
			s = s + " # gitleaks:allow"
		case 5:
			var c strings.Builder
			genRegex(&c, re, rng, 0)
			s = "first\n" + s + "\n\n  " + c.String() + "\n"
		case 6:
			s = strings.ToUpper(kw) + "=" + s + ";" + kw
		}
		out = append(out, s)
	}
	return out
}

// genRegex writes to b a string re matches, or nearly (anchors and word
// boundaries are left to chance).
func genRegex(b *strings.Builder, re *syntax.Regexp, rng *rand.Rand, depth int) {
	reps := func(lo, hi int) int {
		if hi < 0 || hi > lo+4 {
			hi = lo + 4
		}
		return lo + rng.IntN(hi-lo+1)
	}
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 && rng.IntN(3) == 0 {
				r = unicode.SimpleFold(r)
			}
			b.WriteRune(r)
		}
	case syntax.OpCharClass:
		b.WriteRune(classRune(re.Rune, rng))
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		b.WriteByte(byte(33 + rng.IntN(94)))
	case syntax.OpCapture:
		genRegex(b, re.Sub[0], rng, depth)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := 0, -1
		switch re.Op {
		case syntax.OpPlus:
			lo = 1
		case syntax.OpQuest:
			hi = 1
		case syntax.OpRepeat:
			lo, hi = re.Min, re.Max
		}
		if depth > 6 {
			hi = lo
		}
		for range reps(lo, hi) {
			genRegex(b, re.Sub[0], rng, depth+1)
		}
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			genRegex(b, sub, rng, depth)
		}
	case syntax.OpAlternate:
		genRegex(b, re.Sub[rng.IntN(len(re.Sub))], rng, depth)
	}
}

// classRune picks a rune of a character class, mostly printable ASCII.
func classRune(ranges []rune, rng *rand.Rand) rune {
	if len(ranges) == 0 {
		return 'x'
	}
	for range 20 {
		c := rune(32 + rng.IntN(95))
		for i := 0; i < len(ranges); i += 2 {
			if ranges[i] <= c && c <= ranges[i+1] {
				return c
			}
		}
	}
	i := 2 * rng.IntN(len(ranges)/2)
	lo, hi := ranges[i], min(ranges[i+1], ranges[i]+255)
	c := lo + rune(rng.IntN(int(hi-lo+1)))
	if !utf8.ValidRune(c) {
		return lo
	}
	return c
}

// FuzzMatcher: on any text the matcher finds what gitleaks' detector finds.
func FuzzMatcher(f *testing.F) {
	d := gitleaksDetector(f)
	m := gitleaksMatcher
	rng := rand.New(rand.NewPCG(1, 28))
	for i, id := range gitleaksCfg.OrderedRules {
		if i%3 == 0 {
			for _, s := range ruleSamples(f, gitleaksCfg.Rules[id], rng, 2) {
				f.Add(s)
			}
		}
	}
	for _, s := range []string{
		"", "\n", "password = \"Qz7!vR2mK9xP\"\n", "curl -H \"Authorization: Bearer k9Xq2LmP7vR4tY8wZ3nB6cD1fG5hJ0sA\" x",
		"\nghp_4Qx9cVb7Lm2Np8Rt6Yw3Zs5Ka1Df0Gh9Jk2L\n\n", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ9bX2kL8p # gitleaks:allow",
		"İ token=İİİ9cVb7Lm2Np8Rt6Yw3\xff", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHC\n-----END RSA PRIVATE KEY-----",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, want, ok := sameFindings(m, d, s)
		if !ok {
			t.Fatalf("%q\nmatcher:  %+v\ndetector: %+v", s, got, want)
		}
	})
}
