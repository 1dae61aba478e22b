package redact

import "testing"

// TestCredential: header values that are credentials whatever the
// header's name, and values that are not.
func TestCredential(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{
		"ghp_Z7vRsQ4tJnWdEmPxK2aBcD9eFgH1iJkL3mN5":               true,
		"AKIAZ7VRSQ4TJNWDEMPX":                                   true,
		"xoxb-2458760117-2468310942117-ZQ7vRsQ4tJnWdEmPxK2aBcD9": true,
		"Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkFkYSJ9.Zk8h3Jm1vQ2xR7tY9uP4sD6fG0hK5lL8nB3cV1xZ2aQ": true,
		"Bearer {{env.GITHUB_TOKEN}}":      false,
		"application/vnd.github+json":      false,
		"2022-11-28":                       false,
		"toolbelt-agent/1.0 (+ops@org.io)": false,
	} {
		if got := Credential(v); (got != "") != want {
			t.Errorf("Credential(%q) = %q; want a finding: %v", v, got, want)
		}
	}
}
