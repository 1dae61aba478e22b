// Package redact removes secrets from what tools return and what calls record:
// gitleaks' rules (extended by redact.toml) plus the exact configured secret
// values, in plain text and in every string of a JSON document.
package redact

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	ahocorasick "github.com/BobuSumisu/aho-corasick"
	"github.com/spf13/viper"
	"github.com/zricethezav/gitleaks/v8/config"
)

// Redactor removes secrets from tool output and call records before they
// are returned, cached or stored: gitleaks' detection rules (its default
// set, extended by redact.toml) find the usual credentials, and the exact
// values of configured secrets (and Toolbelt's own API keys) are removed
// whatever they look like.
type Redactor struct {
	// find returns the findings of gitleaks' rules in a text (a matcher's
	// find; the tests put gitleaks' own detector here to compare).
	find func(string) []finding
	// keywords holds every keyword of the rules, lowercased: gitleaks runs
	// a rule only on text holding one of its keywords, so text holding none
	// cannot produce a finding. Nil when some rule has no keyword.
	keywords *ahocorasick.Trie
	values   []string // exact secret values, longest first
}

// redactRules extends gitleaks' default rules with the credentials tool
// output carries that the defaults miss (see redact_test.go's corpus).
//
//go:embed redact.toml
var redactRules string

// gitleaksOnce guards the gitleaks configuration, which gitleaks reads
// through a process-wide viper instance.
var (
	gitleaksOnce    sync.Once
	gitleaksCfg     config.Config
	gitleaksMatcher *matcher
	gitleaksKW      *ahocorasick.Trie
	gitleaksErr     error
)

// MinSecretLen is the shortest configured secret value redacted verbatim;
// shorter ones would blank out ordinary words.
const MinSecretLen = 8

var toolbeltKey = regexp.MustCompile(`tb_[0-9a-f]{64}`)

// New returns a redactor that also removes the given secret values.
func New(secretValues []string) (*Redactor, error) {
	gitleaksOnce.Do(func() {
		gitleaksCfg, gitleaksKW, gitleaksErr = loadGitleaks()
		if gitleaksErr == nil {
			gitleaksMatcher = newMatcher(gitleaksCfg)
		}
	})
	if gitleaksErr != nil {
		return nil, gitleaksErr
	}
	r := &Redactor{find: gitleaksMatcher.find, keywords: gitleaksKW}
	for _, v := range secretValues {
		if len(v) >= MinSecretLen {
			r.values = append(r.values, v)
		}
	}
	sort.Slice(r.values, func(a, b int) bool { return len(r.values[a]) > len(r.values[b]) })
	return r, nil
}

// loadGitleaks reads the rules from redact.toml (which extends gitleaks'
// default configuration) and builds the keyword prefilter of its rules.
func loadGitleaks() (config.Config, *ahocorasick.Trie, error) {
	viper.SetConfigType("toml")
	if err := viper.ReadConfig(strings.NewReader(redactRules)); err != nil {
		return config.Config{}, nil, err
	}
	var vc config.ViperConfig
	if err := viper.Unmarshal(&vc); err != nil {
		return config.Config{}, nil, err
	}
	cfg, err := vc.Translate()
	if err != nil {
		return config.Config{}, nil, err
	}
	kws := make([]string, 0, len(cfg.Keywords))
	for k := range cfg.Keywords {
		kws = append(kws, strings.ToLower(k))
	}
	trie := ahocorasick.NewTrieBuilder().AddStrings(kws).Build()
	for _, rule := range cfg.Rules {
		if len(rule.Keywords) == 0 && rule.Regex != nil {
			trie = nil // such a rule runs on any text
		}
	}
	return cfg, trie, nil
}

// Redact replaces every secret in s with a mark naming what it was. The
// rules see s as it is and, when s quotes text itself (a JSON or shell
// file holding \" or \n) or indents it deeply, also as that text reads
// unquoted: gitleaks' patterns want a quote, not \", before a value.
func (r *Redactor) Redact(s string) string {
	if s == "" {
		return s
	}
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, "[REDACTED:configured-secret]")
	}
	if strings.Contains(s, "tb_") {
		s = toolbeltKey.ReplaceAllString(s, "[REDACTED:toolbelt-api-key]")
	}
	s = r.redactFindings(s, s)
	if v := unquotedView(s); v != s {
		s = r.redactFindings(s, v)
	}
	return s
}

// redactFindings removes from s the secrets the rules find in view, which
// is s itself or s unquoted.
func (r *Redactor) redactFindings(s, view string) string {
	if r.keywords != nil && r.keywords.MatchFirstString(strings.ToLower(view)) == nil {
		return s
	}
	findings := r.find(view)
	// Longest first: a secret that holds a shorter one is removed whole.
	sort.SliceStable(findings, func(a, b int) bool { return len(findings[a].Secret) > len(findings[b].Secret) })
	for _, f := range findings {
		if f.Secret == "" {
			continue
		}
		mark := "[REDACTED:" + f.RuleID + "]"
		if strings.Contains(s, f.Secret) {
			s = strings.ReplaceAll(s, f.Secret, mark)
		} else {
			s = quotedPattern(f.Secret).ReplaceAllLiteralString(s, mark)
		}
	}
	return s
}

// unquotedView returns s with the backslash escapes of a string literal
// undone and runs of more than five blanks (gitleaks' patterns allow up to
// five between a key and its value) shortened to one line break or space.
func unquotedView(s string) string {
	if !strings.Contains(s, `\`) && !strings.Contains(s, "      ") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	var run []byte // the blanks since the last other character
	flush := func() {
		switch {
		case len(run) <= 5:
			b.Write(run)
		case bytes.IndexByte(run, '\n') >= 0:
			b.WriteByte('\n')
		default:
			b.WriteByte(' ')
		}
		run = run[:0]
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+5 < len(s) && s[i+1] == 'u' {
			if n, err := strconv.ParseUint(s[i+2:i+6], 16, 16); err == nil && (n < 0xd800 || n > 0xdfff) {
				flush()
				b.WriteRune(rune(n)) // \u003c, as Go's encoder writes <
				i += 5
				continue
			}
		}
		if c == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case 'n':
				c, i = '\n', i+1
			case 'r':
				c, i = '\r', i+1
			case 't':
				c, i = '\t', i+1
			case '"', '\'', '\\', '/':
				c, i = s[i+1], i+1
			}
		}
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			run = append(run, c)
			continue
		}
		flush()
		b.WriteByte(c)
	}
	flush()
	return b.String()
}

// quotedPattern matches secret, found in s's unquoted view, as s holds it:
// each quote, slash or backslash perhaps escaped, each run of blanks as any
// blanks or escaped blanks.
func quotedPattern(secret string) *regexp.Regexp {
	var b strings.Builder
	inBlank := false
	for _, c := range secret {
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			if !inBlank {
				b.WriteString(`(?:\s|\\[nrt])+`)
			}
			inBlank = true
			continue
		}
		inBlank = false
		switch {
		case c == '"' || c == '\'' || c == '\\' || c == '/':
			b.WriteString(`\\?` + regexp.QuoteMeta(string(c)))
		case c < utf8.RuneSelf:
			// Any ASCII character may stand as \uXXXX in a file that is
			// JSON itself ("\u0067hp_…" is a GitHub token).
			fmt.Fprintf(&b, `(?:%s|(?i:\\u%04x))`, regexp.QuoteMeta(string(c)), c)
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return regexp.MustCompile(b.String())
}

// RedactJSON redacts every string (keys included) inside a JSON document
// and returns it re-encoded; text that is not one JSON value is redacted
// as text. Each string is redacted in its decoded form: the escapes JSON
// puts in transit (\" for a quote, \n for a line break, \u0041, \/) would
// otherwise hide a secret from patterns that need a quote or a line start.
func (r *Redactor) RedactJSON(raw []byte) []byte {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return []byte(r.Redact(string(raw)))
	}
	if len(bytes.TrimSpace(raw[dec.InputOffset():])) > 0 {
		return []byte(r.Redact(string(raw)))
	}
	out, err := encodeCanonical(r.walk(v))
	if err != nil {
		return []byte(r.Redact(string(raw)))
	}
	return out
}

// encodeCanonical encodes v compactly, with sorted keys and without HTML
// escaping.
func encodeCanonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func (r *Redactor) walk(v any) any {
	switch x := v.(type) {
	case string:
		return r.Redact(x)
	case []any:
		for i := range x {
			x[i] = r.walk(x[i])
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[r.Redact(k)] = r.walk(val)
		}
		return out
	}
	return v
}
