// Package vault seals the secrets Toolbelt keeps for people (their
// upstream tokens, the values they store for themselves) with AES-256-GCM
// under a key only the server holds (TOOLBELT_VAULT_KEY or a key file), so
// a copy of the database reads nothing. Every value is sealed with
// associated data naming what it belongs to (see Credential): a sealed
// value copied to another row, another person's, does not open there.
//
// A vault holds one key that seals and any older keys that still open,
// each named in what it sealed by an id derived from it, so keys can be
// rotated without a moment when stored values cannot be read.
package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"

	"toolbelt/models"
)

// KeySize is the size of a vault key: AES-256.
const KeySize = 32

// format is the first byte of what Seal makes; idSize bytes of the key's
// id follow, then the nonce and the ciphertext.
const (
	format = 1
	idSize = 8
)

// ErrOpen is Open's answer for a value that does not open: sealed under a
// key this vault does not hold, for other associated data, or altered.
var ErrOpen = errors.New("vault: the value does not open with this server's vault key")

// Vault seals and opens values.
type Vault struct {
	keys []key // keys[0] seals
	// source says where the keys came from (Load), path the key file's
	// path: what Check's error names, never the key.
	source keySource
	path   string
}

// keySource is where Load found a vault's keys.
type keySource int

const (
	sourceCode     keySource = iota // New, called by code
	sourceSetting                   // TOOLBELT_VAULT_KEY
	sourceFile                      // the data directory's key file
	sourceFileMade                  // that file, made at this start
)

type key struct {
	id   [idSize]byte
	aead cipher.AEAD
}

// New returns a vault sealing with the first key and opening with any.
func New(keys ...[]byte) (*Vault, error) {
	if len(keys) == 0 {
		return nil, errors.New("vault: no key")
	}
	v := &Vault{}
	for i, k := range keys {
		if len(k) != KeySize {
			return nil, fmt.Errorf("vault: key %d is %d bytes, not %d", i+1, len(k), KeySize)
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		v.keys = append(v.keys, key{id: KeyID(k), aead: aead})
	}
	return v, nil
}

// KeyID names a key in what it sealed: the start of a hash of it, which
// tells keys apart without saying anything of them.
func KeyID(k []byte) [idSize]byte {
	sum := sha256.Sum256(append([]byte("toolbelt vault key id\x00"), k...))
	return [idSize]byte(sum[:idSize])
}

// Seal encrypts plain for the associated data parts (what the value
// belongs to), with the sealing key.
func (v *Vault) Seal(plain []byte, aad ...string) ([]byte, error) {
	k := v.keys[0]
	out := make([]byte, 0, 1+idSize+k.aead.NonceSize()+len(plain)+k.aead.Overhead())
	out = append(append(out, format), k.id[:]...)
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out = append(out, nonce...)
	return k.aead.Seal(out, nonce, plain, associated(aad)), nil
}

// Open decrypts what Seal made for the same associated data parts;
// ErrOpen when it does not open.
func (v *Vault) Open(sealed []byte, aad ...string) ([]byte, error) {
	if len(sealed) < 1+idSize || sealed[0] != format {
		return nil, ErrOpen
	}
	id := [idSize]byte(sealed[1 : 1+idSize])
	for _, k := range v.keys {
		if k.id != id {
			continue
		}
		rest := sealed[1+idSize:]
		if len(rest) < k.aead.NonceSize() {
			return nil, ErrOpen
		}
		plain, err := k.aead.Open(nil, rest[:k.aead.NonceSize()], rest[k.aead.NonceSize():], associated(aad))
		if err != nil {
			return nil, ErrOpen
		}
		return plain, nil
	}
	return nil, ErrOpen
}

// Sealer reports whether sealed was sealed with the vault's sealing key
// (false: an older key, for rotation to seal again).
func (v *Vault) Sealer(sealed []byte) bool {
	return len(sealed) >= 1+idSize && [idSize]byte(sealed[1:1+idSize]) == v.keys[0].id
}

// associated joins the parts unambiguously: each length-prefixed.
func associated(parts []string) []byte {
	var b []byte
	for _, p := range parts {
		b = append(strconv.AppendInt(b, int64(len(p)), 10), ':')
		b = append(b, p...)
	}
	return b
}

// CredentialData is the associated data a credential's secret is sealed
// with: its owner, kind and name.
func CredentialData(c *models.Credential) []string {
	return []string{"credential", strconv.FormatUint(uint64(c.PrincipalID), 10), c.Kind, c.Name}
}

// SealCredential seals plain into c.Sealed for c's owner, kind and name.
func (v *Vault) SealCredential(c *models.Credential, plain []byte) error {
	sealed, err := v.Seal(plain, CredentialData(c)...)
	if err != nil {
		return err
	}
	c.Sealed = sealed
	return nil
}

// OpenCredential opens c.Sealed.
func (v *Vault) OpenCredential(c *models.Credential) ([]byte, error) {
	return v.Open(c.Sealed, CredentialData(c)...)
}
