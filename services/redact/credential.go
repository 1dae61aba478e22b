package redact

import "strings"

// Credential names the rule by which s holds a credential (a gitleaks
// rule's ID, as its redaction mark says), "" when none finds one. It is
// for values a registration would store and show, such as a header
// written literally where {{env.NAME}} belongs: the same rules as the
// redaction of tool output, in every view of s they see. A name or value
// that only looks like a credential ("token") is the header's name's
// check, not this one's.
func Credential(s string) string {
	r, err := New(nil)
	if err != nil {
		// The rules are embedded: they fail to load for every caller
		// alike, and the server does not start. Refuse meanwhile.
		return "secret-detection-unavailable"
	}
	red := r.Redact(s)
	if red == s {
		return ""
	}
	_, rest, ok := strings.Cut(red, "[REDACTED:")
	rule, _, _ := strings.Cut(rest, "]")
	if !ok || rule == "" {
		return "secret"
	}
	return rule
}

// MaskCredentials is values with each value Credential finds a
// credential in replaced by its mark ([REDACTED:<rule>]), for showing a
// registration stored before such values were refused. values itself is
// left as it is.
func MaskCredentials(values map[string]string) map[string]string {
	if values == nil {
		return nil
	}
	out := make(map[string]string, len(values))
	for name, v := range values {
		if rule := Credential(v); rule != "" {
			v = "[REDACTED:" + rule + "]"
		}
		out[name] = v
	}
	return out
}
