package console

import "testing"

// An attacker links to the sign-in page with a next of their own: only a
// console path on this origin is followed.
func TestSafeNextRefusesOtherOrigins(t *testing.T) {
	t.Parallel()
	for _, next := range []string{
		"", "//evil.example", "/\\evil.example", "/\\/evil.example", "https://evil.example/admin", "http:/evil.example",
		"javascript:alert(1)", "/admin/..//evil.example", "/admin//evil.example", "/admin/%2F%2Fevil.example",
		"/admin/%5Cevil.example", "/admin/%2e%2e/%2e%2e", "/admin\t//evil", "/admin\r\nLocation: //evil", "/admin.evil.example",
		"/adminx", "/other", "/admin/login?next=//evil", "%2F%2Fevil.example", "/%2Fevil.example", " //evil.example",
		"///evil.example", "/admin@evil.example", "/admin/x\\y",
	} {
		if got := safeNext(next); got != "/admin" {
			t.Errorf("safeNext(%q) = %q, want /admin", next, got)
		}
	}
	for _, next := range []string{"/admin", "/admin/tools", "/admin/oauth/consent?id=ABC234", "/admin/tools?q=a%2Fb"} {
		if got := safeNext(next); got != next {
			t.Errorf("safeNext(%q) = %q, want it kept", next, got)
		}
	}
}
