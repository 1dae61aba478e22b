package services

import (
	"bytes"
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/zricethezav/gitleaks/v8/detect"
)

// Redactor removes secrets from tool output and call records before they
// are returned, cached or stored: gitleaks' detection rules find the usual
// credentials, and the exact values of configured secrets (and Toolbelt's
// own API keys) are removed whatever they look like.
type Redactor struct {
	det    *detect.Detector
	values []string // exact secret values, longest first
}

// gitleaksOnce guards gitleaks' default configuration, which it reads
// through a process-wide viper instance.
var (
	gitleaksOnce sync.Once
	gitleaksDet  *detect.Detector
	gitleaksErr  error
)

// MinSecretLen is the shortest configured secret value redacted verbatim;
// shorter ones would blank out ordinary words.
const MinSecretLen = 8

var toolbeltKey = regexp.MustCompile(`tb_[0-9a-f]{64}`)

// NewRedactor returns a redactor that also removes the given secret values.
func NewRedactor(secretValues []string) (*Redactor, error) {
	gitleaksOnce.Do(func() { gitleaksDet, gitleaksErr = detect.NewDetectorDefaultConfig() })
	if gitleaksErr != nil {
		return nil, gitleaksErr
	}
	r := &Redactor{det: gitleaksDet}
	for _, v := range secretValues {
		if len(v) >= MinSecretLen {
			r.values = append(r.values, v)
		}
	}
	sort.Slice(r.values, func(a, b int) bool { return len(r.values[a]) > len(r.values[b]) })
	return r, nil
}

// Redact replaces every secret in s with a mark naming what it was.
func (r *Redactor) Redact(s string) string {
	if s == "" {
		return s
	}
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, "[REDACTED:configured-secret]")
	}
	s = toolbeltKey.ReplaceAllString(s, "[REDACTED:toolbelt-api-key]")
	for _, f := range r.det.DetectString(s) {
		if f.Secret != "" {
			s = strings.ReplaceAll(s, f.Secret, "[REDACTED:"+f.RuleID+"]")
		}
	}
	return s
}

// RedactJSON redacts every string (keys included) inside a JSON document
// and returns it re-encoded; text that is not JSON is redacted as text.
// The document is first re-encoded canonically (no escapes a secret could
// hide behind, such as \/ or \u0041); most documents then hold no secret,
// which one scan of the whole text settles.
func (r *Redactor) RedactJSON(raw []byte) []byte {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return []byte(r.Redact(string(raw)))
	}
	canon, err := encodeCanonical(v)
	if err != nil {
		return []byte(r.Redact(string(raw)))
	}
	if !r.holdsSecret(string(canon)) {
		return canon
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

// holdsSecret reports whether s holds anything Redact would remove.
func (r *Redactor) holdsSecret(s string) bool {
	for _, v := range r.values {
		if strings.Contains(s, v) {
			return true
		}
	}
	return toolbeltKey.MatchString(s) || len(r.det.DetectString(s)) > 0
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
