package authserver

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/zitadel/oidc/v3/pkg/op"
)

// Token prefixes: a leaked token is recognisable (and for secret scanners
// to find), and the web layer routes a bearer token to Tokens by it.
const (
	AccessPrefix  = "tbat_"
	RefreshPrefix = "tbrt_"
)

// tokenCrypto is op's AES-256-GCM with the access token prefix: op makes
// an access token by encrypting "tokenID:subject" (authorization codes,
// the encrypted request id, carry no prefix).
type tokenCrypto struct{ op.Crypto }

func (c tokenCrypto) Encrypt(s string) (string, error) {
	out, err := c.Crypto.Encrypt(s)
	if err != nil || !strings.Contains(s, ":") {
		return out, err
	}
	return AccessPrefix + out, nil
}

func (c tokenCrypto) Decrypt(s string) (string, error) {
	return c.Crypto.Decrypt(strings.TrimPrefix(s, AccessPrefix))
}

// hash is how codes and refresh tokens are stored: they are random and
// long, so a fast hash is enough.
func hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
