package identity

import (
	"crypto/sha256"
	"testing"
)

// The grant of a provider token carries the token itself, for token
// exchange: from a fresh verification and from the cache alike, each
// token its own (the cache keeps only hashes).
func TestJWTGrantCarriesItsOwnToken(t *testing.T) {
	t.Parallel()
	f := newJWTFixture(t)
	first := f.idp.AccessToken(t, "ada", "mcp-client", "openid", "tools:read")
	second := f.idp.AccessToken(t, "ada", "mcp-client", "openid", "tools:read")
	for _, tok := range []string{first, first, second, first} {
		g, err := f.verifier.Verify(t.Context(), tok, mcpResource)
		if err != nil {
			t.Fatal(err)
		}
		if g.SubjectToken != tok {
			t.Fatalf("the grant carries another token than the one verified")
		}
	}
	if e, ok := f.verifier.verified.Get(sha256.Sum256([]byte(first))); !ok || e.grant.SubjectToken != "" {
		t.Errorf("the verified-token cache holds the token (cached %v)", ok)
	}
}
