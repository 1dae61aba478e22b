//go:build ignore

// Command labelgitleaks turns the true and false positives of gitleaks' rule tests
// (dumped by a patched utils.Validate) into test examples: each true
// positive's secrets are re-randomised (same character classes, known
// prefixes kept) so that no literal value from the tests is reused, and the
// result must still be found by gitleaks' default rules on the bare text.
//
//	sh services/redact/testdata/secrets/extract-gitleaks.sh > services/redact/testdata/secrets/gitleaks.jsonl
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/zricethezav/gitleaks/v8/detect"
)

var rng = rand.New(rand.NewPCG(14, 2))

func mutate(s string, keep int) string {
	b := []byte(s)
	for i := keep; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = byte('a' + rng.IntN(26))
		case c >= 'A' && c <= 'Z':
			b[i] = byte('A' + rng.IntN(26))
		case c >= '0' && c <= '9':
			b[i] = byte('0' + rng.IntN(10))
		}
	}
	return string(b)
}

func secretsOf(d *detect.Detector, text string) []string {
	var out []string
	for _, f := range d.DetectString(text) {
		if f.Secret != "" {
			out = append(out, f.Secret)
		}
	}
	return out
}

func main() {
	d, err := detect.NewDetectorDefaultConfig()
	if err != nil {
		panic(err)
	}
	in, _ := os.Open(os.Args[1])
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	seen := map[string]bool{}
	drop := map[string]int{}
	for sc.Scan() {
		var r struct{ Rule, Kind, Text string }
		json.Unmarshal(sc.Bytes(), &r)
		if seen[r.Kind+r.Text] {
			drop["dup"]++
			continue
		}
		seen[r.Kind+r.Text] = true
		secrets := secretsOf(d, r.Text)
		if r.Kind == "fp" {
			if len(d.DetectString(r.Text)) > 0 {
				drop["fp-detected-by-other-rule"]++
				continue
			}
			enc.Encode(map[string]any{"source": "gitleaks-v8.30.1-rule-tests", "rule": r.Rule, "tp": false, "text": r.Text})
			continue
		}
		if len(secrets) == 0 {
			drop["tp-undetected"]++
			continue
		}
		text, ok := r.Text, true
		for _, s := range uniq(secrets) {
			done := false
			for _, keep := range []int{prefixLen(s), 4, 8, 12} {
				if keep > len(s)-6 {
					continue
				}
				m := mutate(s, keep)
				cand := strings.ReplaceAll(text, s, m)
				if m != s && contains(secretsOf(d, cand), m) {
					text, done = cand, true
					break
				}
			}
			if !done {
				ok = false
			}
		}
		if !ok {
			drop["tp-not-rerandomisable"]++
			continue
		}
		enc.Encode(map[string]any{"source": "gitleaks-v8.30.1-rule-tests", "rule": r.Rule, "tp": true, "text": text, "secrets": uniq(secretsOf(d, text))})
	}
	fmt.Fprintln(os.Stderr, drop)
}

// prefixLen is the length of a leading identifier such as ghp_ or sk-ant-api03-.
func prefixLen(s string) int {
	n := 0
	for i := 0; i < len(s) && i < 16; i++ {
		if s[i] == '_' || s[i] == '-' {
			n = i + 1
		}
	}
	return n
}

func uniq(xs []string) []string {
	var out []string
	for _, x := range xs {
		if !contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
