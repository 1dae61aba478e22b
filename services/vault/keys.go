package vault

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"

	"toolbelt/internal/keyfile"
)

// KeyFile is the vault key's file in the data directory, made at the
// first start when TOOLBELT_VAULT_KEY is unset.
const KeyFile = "vault.key"

// Load returns the vault of configured (TOOLBELT_VAULT_KEY: keys of 32
// bytes, hex or base64, separated by commas, the first sealing and the
// others only opening, for rotation), or of the key file in dataDir.
func Load(configured, dataDir string) (*Vault, error) {
	if strings.TrimSpace(configured) == "" {
		path := filepath.Join(dataDir, KeyFile)
		source := sourceFile
		k, err := keyfile.Load(path, "vault key", KeySize, func() []byte {
			source = sourceFileMade
			return []byte(hex.EncodeToString(randomKey()))
		})
		if err != nil {
			return nil, err
		}
		key, err := ParseKey(strings.TrimSpace(string(k)))
		if err != nil {
			return nil, fmt.Errorf("vault key %s: %w", path, err)
		}
		v, err := New(key)
		if err != nil {
			return nil, err
		}
		v.source, v.path = source, path
		return v, nil
	}
	var keys [][]byte
	for i, s := range strings.Split(configured, ",") {
		k, err := ParseKey(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("TOOLBELT_VAULT_KEY: key %d: %w", i+1, err)
		}
		keys = append(keys, k)
	}
	v, err := New(keys...)
	if err != nil {
		return nil, err
	}
	v.source = sourceSetting
	return v, nil
}

// ParseKey reads a key written as hex (64 digits) or base64 (standard or
// URL alphabet, padded or not) of 32 bytes.
func ParseKey(s string) ([]byte, error) {
	if k, err := hex.DecodeString(s); err == nil && len(k) == KeySize {
		return k, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil && len(k) == KeySize {
			return k, nil
		}
	}
	return nil, fmt.Errorf("not 32 bytes in hex or base64 (make one with: openssl rand -hex 32)")
}

func randomKey() []byte {
	k := make([]byte, KeySize)
	_, _ = rand.Read(k) // never fails (crypto/rand)
	return k
}
