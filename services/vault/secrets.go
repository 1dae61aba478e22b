package vault

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"toolbelt/models"
)

// SecretNamePattern is the rule for the name of a personal secret, as
// {{user.secret.NAME}} names it: an environment variable's shape.
var SecretNamePattern = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

// MaxSecretBytes bounds a personal secret's value: tokens and keys are far
// shorter; a header carrying more is refused by most servers anyway.
const MaxSecretBytes = 8 << 10

// Secrets keeps the values people store for themselves (an API token of
// theirs), sealed by the vault, for tools that fill {{user.secret.NAME}}
// with the value of the person a call acts for. Nobody reads a value
// back: the API and the console list names and dates only.
type Secrets struct {
	store *models.Store
	vault *Vault
	// OnChange, when set, is told of each secret stored, replaced or
	// deleted (after it is), so what was started with the old value
	// (an upstream process of the person's) stops using it.
	OnChange func(principal uint, name string)
}

// NewSecrets returns the personal secrets kept in store, sealed by v.
func NewSecrets(store *models.Store, v *Vault) *Secrets {
	return &Secrets{store: store, vault: v}
}

// Secret describes a stored secret without its value.
type Secret struct {
	Name      string    `json:"name" example:"GITHUB_TOKEN"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// CheckSecretName says why name cannot name a personal secret.
func CheckSecretName(name string) error {
	if !SecretNamePattern.MatchString(name) {
		return models.ErrInvalid.Errorf("name %q: a secret's name is an upper-case letter then up to 63 of A-Z, 0-9 and _ (such as GITHUB_TOKEN)", clipName(name))
	}
	return nil
}

// checkValue says why value cannot be stored: it fills a header, so one
// line, and it must say something.
func checkValue(value string) error {
	switch {
	case value == "":
		return models.ErrInvalid.Errorf("value: is empty; give the secret's value (to remove a secret, delete it)")
	case len(value) > MaxSecretBytes:
		return models.ErrInvalid.Errorf("value: is %d bytes; at most %d are kept", len(value), MaxSecretBytes)
	case strings.ContainsAny(value, "\r\n\x00"):
		return models.ErrInvalid.Errorf("value: holds a line break or NUL; a secret fills a header, so it is one line")
	}
	return nil
}

// Put stores value as p's secret name, replacing the one stored, and
// records it in the audit log (the name, never the value).
func (s *Secrets) Put(ctx context.Context, p *models.Principal, name, value string) (*Secret, error) {
	if err := CheckSecretName(name); err != nil {
		return nil, err
	}
	if err := checkValue(value); err != nil {
		return nil, err
	}
	c := &models.Credential{PrincipalID: p.ID, Kind: models.CredentialSecret, Name: name}
	if err := s.vault.SealCredential(c, []byte(value)); err != nil {
		return nil, err
	}
	err := s.store.Audited(ctx, models.AuditSecretSet, func(tx *models.Store) (string, string, error) {
		detail := "stored"
		if _, err := tx.CredentialOf(ctx, p.ID, c.Kind, name); err == nil {
			detail = "replaced"
		}
		return secretTarget(name), fmt.Sprintf("%s, of %s (%d)", detail, p.Name, p.ID), tx.PutCredential(ctx, c)
	})
	if err != nil {
		return nil, err
	}
	s.changed(p.ID, name)
	stored, err := s.store.CredentialOf(ctx, p.ID, c.Kind, name)
	if err != nil {
		return nil, err
	}
	return describe(stored), nil
}

// List lists the principal's secrets by name, without their values.
func (s *Secrets) List(ctx context.Context, principal uint) ([]Secret, error) {
	rows, err := s.store.CredentialsOf(ctx, principal, models.CredentialSecret)
	if err != nil {
		return nil, err
	}
	out := make([]Secret, len(rows))
	for i := range rows {
		out[i] = *describe(&rows[i])
	}
	return out, nil
}

// Delete deletes p's secret name and records it in the audit log;
// models.ErrNotFound when none is stored.
func (s *Secrets) Delete(ctx context.Context, p *models.Principal, name string) error {
	if err := CheckSecretName(name); err != nil {
		return err
	}
	err := s.store.Audited(ctx, models.AuditSecretDelete, func(tx *models.Store) (string, string, error) {
		_, err := tx.DeleteCredential(ctx, p.ID, models.CredentialSecret, name)
		return secretTarget(name), fmt.Sprintf("of %s (%d)", p.Name, p.ID), err
	})
	if err == nil {
		s.changed(p.ID, name)
	}
	return err
}

func (s *Secrets) changed(principal uint, name string) {
	if s.OnChange != nil {
		s.OnChange(principal, name)
	}
}

// PersonalSecret returns the value of the principal's secret name, for a
// tool filling {{user.secret.NAME}} in a call acting for them; an error
// wrapping models.ErrNotFound when they stored none.
func (s *Secrets) PersonalSecret(ctx context.Context, principal uint, name string) (string, error) {
	c, err := s.store.CredentialOf(ctx, principal, models.CredentialSecret, name)
	if err != nil {
		return "", err
	}
	plain, err := s.vault.OpenCredential(c)
	if errors.Is(err, ErrOpen) {
		return "", fmt.Errorf("the secret %s of principal %d: %w", name, principal, err)
	}
	return string(plain), err
}

func describe(c *models.Credential) *Secret {
	return &Secret{Name: c.Name, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
}

func secretTarget(name string) string { return "secret:" + name }

// clipName cuts a refused name for its error message.
func clipName(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
