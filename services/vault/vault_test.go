package vault

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"

	"toolbelt/models"
)

func newKey(t *testing.T) []byte {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpensOnlyForItsOwnerAndKey(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	v, err := New(k1)
	if err != nil {
		t.Fatal(err)
	}
	alice := &models.Credential{PrincipalID: 7, Kind: models.CredentialOAuth, Name: "github"}
	if err := v.SealCredential(alice, []byte("alice-token")); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(alice.Sealed, []byte("alice-token")) {
		t.Fatal("the sealed value carries the plain text")
	}
	if got, err := v.OpenCredential(alice); err != nil || string(got) != "alice-token" {
		t.Fatalf("open = %q, %v", got, err)
	}
	// The same sealed bytes moved to another person's row, or another
	// upstream's, do not open.
	for _, moved := range []*models.Credential{
		{PrincipalID: 8, Kind: models.CredentialOAuth, Name: "github", Sealed: alice.Sealed},
		{PrincipalID: 7, Kind: models.CredentialOAuth, Name: "gitlab", Sealed: alice.Sealed},
		{PrincipalID: 7, Kind: models.CredentialSecret, Name: "github", Sealed: alice.Sealed},
		// "7","oauth" vs "7o","auth": parts are length-prefixed.
		{PrincipalID: 7, Kind: "oauthg", Name: "ithub", Sealed: alice.Sealed},
	} {
		if _, err := v.OpenCredential(moved); !errors.Is(err, ErrOpen) {
			t.Errorf("moved to %d/%s/%s: err = %v, want ErrOpen", moved.PrincipalID, moved.Kind, moved.Name, err)
		}
	}
	// Another key opens nothing; a flipped bit opens nothing.
	other, _ := New(k2)
	if _, err := other.OpenCredential(alice); !errors.Is(err, ErrOpen) {
		t.Errorf("another key: err = %v", err)
	}
	bad := bytes.Clone(alice.Sealed)
	bad[len(bad)-1] ^= 1
	if _, err := v.Open(bad, CredentialData(alice)...); !errors.Is(err, ErrOpen) {
		t.Errorf("altered: err = %v", err)
	}
	// Rotated: the new key seals, the old one still opens.
	rotated, _ := New(k2, k1)
	if got, err := rotated.OpenCredential(alice); err != nil || string(got) != "alice-token" || rotated.Sealer(alice.Sealed) {
		t.Fatalf("rotated open = %q, %v (sealer %v)", got, err, rotated.Sealer(alice.Sealed))
	}
	if _, err := New(k1[:16]); err == nil {
		t.Error("a 16-byte key was taken")
	}
}
