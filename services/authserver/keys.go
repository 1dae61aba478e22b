package authserver

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/zitadel/oidc/v3/pkg/op"

	"toolbelt/internal/keyfile"
)

// KeyFile is where, unless TOOLBELT_OAUTH_KEY is set, the key made at
// first start is kept, in the data directory.
const KeyFile = "oauth.key"

// MinKeyBytes is the shortest TOOLBELT_OAUTH_KEY accepted.
const MinKeyBytes = 32

// LoadKey returns the server's OAuth key: configured (TOOLBELT_OAUTH_KEY),
// or read from dataDir/oauth.key, made there at first start. Every
// instance sharing a database must have the same key: tokens one issues
// the others decrypt, and the signing key is stored encrypted with it.
func LoadKey(configured, dataDir string) ([]byte, error) {
	if configured != "" {
		if len(configured) < MinKeyBytes {
			return nil, fmt.Errorf("TOOLBELT_OAUTH_KEY must be at least %d bytes", MinKeyBytes)
		}
		return []byte(configured), nil
	}
	return keyfile.Load(filepath.Join(dataDir, KeyFile), "oauth key", MinKeyBytes, func() []byte {
		return []byte(rand.Text() + rand.Text()) // 260 bits, printable
	})
}

// derive makes a 32-byte key for one purpose from the server's key, so the
// token encryption and the signing key's never share a key.
func derive(secret []byte, purpose string) [32]byte {
	var out [32]byte
	k, err := hkdf.Key(sha256.New, secret, nil, "toolbelt oauth "+purpose, len(out))
	if err != nil {
		panic(err) // only for a length hkdf cannot give
	}
	copy(out[:], k)
	return out
}

// keyID names a derived key in the encrypted values, so a changed
// TOOLBELT_OAUTH_KEY is recognised as such.
func keyID(k [32]byte) string {
	sum := sha256.Sum256(k[:])
	return base64.RawURLEncoding.EncodeToString(sum[:6])
}

// sealKey and openKey store the RSA signing key encrypted (op's AES-GCM).
func sealKey(c op.Crypto, k *rsa.PrivateKey) (string, error) {
	return c.Encrypt(base64.RawStdEncoding.EncodeToString(x509.MarshalPKCS1PrivateKey(k)))
}

func openKey(c op.Crypto, sealed string) (*rsa.PrivateKey, error) {
	plain, err := c.Decrypt(sealed)
	if err != nil {
		return nil, errors.New("the stored oauth signing key does not decrypt with this TOOLBELT_OAUTH_KEY: every instance needs the same key")
	}
	der, err := base64.RawStdEncoding.DecodeString(plain)
	if err != nil {
		return nil, fmt.Errorf("stored oauth signing key: %w", err)
	}
	return x509.ParsePKCS1PrivateKey(der)
}
