// Package redact removes secrets from what tools return and what calls record:
// gitleaks' rules (extended by redact.toml) plus the exact configured secret
// values and Toolbelt's API keys, in plain text and in every string of a JSON
// document, as written and as they read once escapes, character references,
// invisible characters, base64, hex and %xx are undone (decoded.go).
package redact

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

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
	// values holds the configured secret values, each also in hex and
	// base64, longest first.
	values []string
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
			r.values = append(r.values, encodedValue(v)...)
		}
	}
	sort.Slice(r.values, func(a, b int) bool { return len(r.values[a]) > len(r.values[b]) })
	return r, nil
}

// encodedValue returns v in hex and base64 as a text would spell it on
// its own: gitleaks' decoder, which finds other secrets in encoded text,
// passes over hex shorter than 32 digits and base64 shorter than 16
// characters, which a short password fills. (Inside a longer blob it is
// the decoder's.) The base64 forms lack their padding, which may follow.
func encodedValue(v string) []string {
	b := []byte(v)
	return slices.Compact(slices.Sorted(slices.Values([]string{
		hex.EncodeToString(b),
		strings.ToUpper(hex.EncodeToString(b)),
		base64.RawStdEncoding.EncodeToString(b),
		base64.RawURLEncoding.EncodeToString(b),
	})))
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
// rules see s as it is and, when s spells text otherwise (a JSON or shell
// file holding \" or \n, escapes, HTML references, invisible characters,
// base64, hex or %xx: see decoded.go), also as that text reads once
// undone: gitleaks' patterns want a quote, not \", before a value, and a
// configured secret is known only as it is.
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
	s = r.redactFindings(s)
	return r.redactDecoded(s)
}

// redactFindings removes from s the secrets the rules find in it.
func (r *Redactor) redactFindings(s string) string {
	if r.keywords != nil && r.keywords.MatchFirstString(strings.ToLower(s)) == nil {
		return s
	}
	findings := r.find(s)
	// Longest first: a secret that holds a shorter one is removed whole.
	sort.SliceStable(findings, func(a, b int) bool { return len(findings[a].Secret) > len(findings[b].Secret) })
	for _, f := range findings {
		if f.Secret != "" {
			s = strings.ReplaceAll(s, f.Secret, "[REDACTED:"+f.RuleID+"]")
		}
	}
	return s
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
