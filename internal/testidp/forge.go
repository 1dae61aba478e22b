package testidp

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Claims are the claims of an access token this provider would issue to
// user for resource, valid for ttl from now (negative: already expired),
// with scopes as a space-separated "scope". Tests change them and sign
// them with Sign or one of the Forge helpers.
func (idp *IDP) Claims(username, resource string, ttl time.Duration, scopes ...string) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss":   idp.Issuer,
		"aud":   []string{resource},
		"iat":   now.Add(-time.Minute).Unix(),
		"nbf":   now.Add(-time.Minute).Unix(),
		"exp":   now.Add(ttl).Unix(),
		"jti":   rand.Text(),
		"scope": strings.Join(scopes, " "),
	}
	if u := idp.user(username); u != nil {
		c["sub"] = u.ID
		c["preferred_username"] = u.Username
		c[idp.groupsClaim] = idp.groups(u.ID)
		if u.Email != "" {
			c["email"] = u.Email
		}
		if u.Name != "" {
			c["name"] = u.Name
		}
	}
	return c
}

// Sign signs claims with the provider's own key (RS256, its kid): a token
// the provider could have issued, for claims it would not have put there
// (expired, another audience) — what a verifier must refuse on its own.
func (idp *IDP) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	key, err := idp.storage.SigningKey(t.Context())
	if err != nil {
		t.Fatalf("testidp: signing key: %v", err)
	}
	return sign(t, claims, key.Key(), key.ID())
}

// ForgeWithKey signs claims with a fresh RSA key the provider never
// published, under kid; an empty kid uses the provider's real kid (a
// key-confusion attempt), any other is unknown to its JWKS.
func (idp *IDP) ForgeWithKey(t testing.TB, claims map[string]any, kid string) string {
	t.Helper()
	if kid == "" {
		key, err := idp.storage.SigningKey(t.Context())
		if err != nil {
			t.Fatalf("testidp: signing key: %v", err)
		}
		kid = key.ID()
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return sign(t, claims, other, kid)
}

// ForgeNone returns claims as an unsigned JWT ("alg": "none", empty
// signature), which a verifier must never accept.
func ForgeNone(t testing.TB, claims map[string]any) string {
	t.Helper()
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	return header + "." + enc.EncodeToString(marshal(t, claims)) + "."
}

func sign(t testing.TB, claims map[string]any, key any, kid string) string {
	t.Helper()
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatalf("testidp: signer: %v", err)
	}
	jws, err := signer.Sign(marshal(t, claims))
	if err != nil {
		t.Fatalf("testidp: sign: %v", err)
	}
	token, err := jws.CompactSerialize()
	if err != nil {
		t.Fatalf("testidp: serialize: %v", err)
	}
	return token
}

func marshal(t testing.TB, claims map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatalf("testidp: claims: %v", err)
	}
	return b
}
