package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Principal is an account that calls Toolbelt: an admin, a reviewer or an
// agent.
type Principal struct {
	ID        uint      `gorm:"primaryKey" json:"id"`
	Name      string    `gorm:"size:64;not null;uniqueIndex" json:"name"`
	Role      string    `gorm:"size:16;not null" json:"role"`
	CreatedAt time.Time `json:"created_at"`
	Keys      []APIKey  `gorm:"constraint:OnDelete:CASCADE" json:"keys,omitempty"`
	// CallbackGeneration names the principal's current callback signing
	// secret, derived from it and the server's key; rotating the secret
	// moves it on. Nothing else of the secret is stored.
	CallbackGeneration uint `gorm:"not null;default:0" json:"-"`
	// DisabledAt, when set, is when the principal was disabled: none of
	// its keys authenticate and its console sessions end, until enabled.
	DisabledAt *time.Time `json:"disabled_at,omitempty"`
}

// APIKey is a credential of a principal. Only the SHA-256 of the key is
// stored (keys are 256-bit random, so a fast hash is enough); Prefix lets a
// human tell keys apart.
type APIKey struct {
	ID          uint       `gorm:"primaryKey" json:"id"`
	PrincipalID uint       `gorm:"not null;index" json:"principal_id"`
	Prefix      string     `gorm:"size:16;not null" json:"prefix"`
	Hash        string     `gorm:"size:64;not null;uniqueIndex" json:"-"`
	CreatedAt   time.Time  `json:"created_at"`
	LastUsedAt  *time.Time `json:"last_used_at,omitempty"`
	RevokedAt   *time.Time `json:"revoked_at,omitempty"`
	// Label says what the key is for ("ci deploy"); optional.
	Label string `gorm:"size:64;not null;default:''" json:"label,omitempty"`
	// ExpiresAt, when set, is when the key stops authenticating.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// Expired reports whether the key's expiry has passed at now.
func (k *APIKey) Expired(now time.Time) bool { return k.ExpiresAt != nil && !now.Before(*k.ExpiresAt) }

// CreatePrincipal stores a principal and its first key in one transaction.
func (s *Store) CreatePrincipal(ctx context.Context, p *Principal, key *APIKey) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Omit("Keys").Create(p).Error; err != nil {
			return err
		}
		key.PrincipalID = p.ID
		return tx.Create(key).Error
	})
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return ErrConflict.Errorf("principal %q", p.Name)
	}
	if err != nil {
		return fmt.Errorf("create principal %q: %w", p.Name, err)
	}
	return nil
}

// CountPrincipals returns how many principals exist.
func (s *Store) CountPrincipals(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&Principal{}).Count(&n).Error
	return n, err
}

// Principals lists every principal with its keys, oldest first.
func (s *Store) Principals(ctx context.Context) ([]Principal, error) {
	var ps []Principal
	err := s.db.WithContext(ctx).Preload("Keys", func(db *gorm.DB) *gorm.DB { return db.Order("id") }).
		Order("id").Find(&ps).Error
	if err != nil {
		return nil, fmt.Errorf("list principals: %w", err)
	}
	return ps, nil
}

// PrincipalByID returns one principal without its keys.
func (s *Store) PrincipalByID(ctx context.Context, id uint) (*Principal, error) {
	var p Principal
	if err := s.db.WithContext(ctx).First(&p, id).Error; err != nil {
		return nil, notFound(err, "principal %d", id)
	}
	return &p, nil
}

// PrincipalByName returns one principal without its keys.
func (s *Store) PrincipalByName(ctx context.Context, name string) (*Principal, error) {
	var p Principal
	if err := s.db.WithContext(ctx).Where("name = ?", name).First(&p).Error; err != nil {
		return nil, notFound(err, "principal %q", name)
	}
	return &p, nil
}

// CreateAPIKey adds a key to an existing principal.
func (s *Store) CreateAPIKey(ctx context.Context, key *APIKey) error {
	if err := s.db.WithContext(ctx).Create(key).Error; err != nil {
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			return ErrConflict.Errorf("that key is already in use")
		}
		return fmt.Errorf("create api key: %w", err)
	}
	return nil
}

// KeyByHash finds an unrevoked key and its principal for authentication.
// An expired key and a disabled principal are returned as they are: the
// caller refuses them, saying which.
func (s *Store) KeyByHash(ctx context.Context, hash string) (*APIKey, *Principal, error) {
	var key APIKey
	err := s.db.WithContext(ctx).Where("hash = ? AND revoked_at IS NULL", hash).First(&key).Error
	if err != nil {
		return nil, nil, notFound(err, "api key")
	}
	p, err := s.PrincipalByID(ctx, key.PrincipalID)
	if err != nil {
		return nil, nil, err
	}
	return &key, p, nil
}

// TouchAPIKey records when a key was last used.
func (s *Store) TouchAPIKey(ctx context.Context, id uint, at time.Time) error {
	return s.db.WithContext(ctx).Model(&APIKey{}).Where("id = ?", id).Update("last_used_at", at).Error
}

// RevokeAPIKey revokes a key. guard runs inside the transaction with the
// key, its principal and the number of the other keys that let an admin in,
// so the last way into the system cannot be revoked by a race.
func (s *Store) RevokeAPIKey(ctx context.Context, id uint, guard func(key *APIKey, owner *Principal, otherAdminKeys int64) error) (*APIKey, error) {
	var key APIKey
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// Two revocations of the last two admin keys must not both pass.
		if err := s.dialect.serialize(tx, "revoke-keys"); err != nil {
			return err
		}
		if err := tx.Where("id = ? AND revoked_at IS NULL", id).First(&key).Error; err != nil {
			return notFound(err, "active api key %d", id)
		}
		var owner Principal
		if err := tx.First(&owner, key.PrincipalID).Error; err != nil {
			return err
		}
		others, err := activeAdminKeys(tx, 0, key.ID)
		if err != nil {
			return err
		}
		if err := guard(&key, &owner, others); err != nil {
			return err
		}
		now := time.Now().UTC()
		key.RevokedAt = &now
		return tx.Model(&key).Update("revoked_at", now).Error
	})
	if err != nil {
		return nil, fmt.Errorf("revoke api key %d: %w", id, err)
	}
	return &key, nil
}

// activeAdminKeys counts the keys that let an admin in (unrevoked,
// unexpired, of an enabled admin), leaving out the principal exceptPrincipal
// and the key exceptKey (0: none).
func activeAdminKeys(tx *gorm.DB, exceptPrincipal, exceptKey uint) (int64, error) {
	var n int64
	err := tx.Model(&APIKey{}).
		Joins("JOIN principals ON principals.id = api_keys.principal_id").
		Where("principals.role = ? AND principals.disabled_at IS NULL AND principals.id <> ? AND api_keys.id <> ?", "admin", exceptPrincipal, exceptKey).
		Where("api_keys.revoked_at IS NULL AND (api_keys.expires_at IS NULL OR api_keys.expires_at > ?)", time.Now().UTC()).
		Count(&n).Error
	return n, err
}

// PrincipalGuard sees, inside the transaction, the principal a change is
// about and how many keys would still let an admin in without it; its
// error stops the change.
type PrincipalGuard func(p *Principal, otherAdminKeys int64) error

// SetPrincipalDisabled disables (or enables again) a principal. guard
// runs in the transaction, so two admins disabling each other cannot both
// pass the last-admin check.
func (s *Store) SetPrincipalDisabled(ctx context.Context, id uint, disabled bool, guard PrincipalGuard) (*Principal, error) {
	var p Principal
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := s.guardPrincipal(tx, id, guard, &p); err != nil {
			return err
		}
		var at *time.Time
		if disabled {
			now := time.Now().UTC()
			at = &now
		}
		p.DisabledAt = at
		return tx.Model(&p).Update("disabled_at", at).Error
	})
	if err != nil {
		return nil, fmt.Errorf("update principal %d: %w", id, err)
	}
	return &p, nil
}

// DeletePrincipal removes a principal, its keys, console sessions and
// identities (a person signing in again gets a new principal);
// calls and the audit log keep its name. guard runs in the transaction as
// for SetPrincipalDisabled.
func (s *Store) DeletePrincipal(ctx context.Context, id uint, guard PrincipalGuard) (*Principal, error) {
	var p Principal
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := s.guardPrincipal(tx, id, guard, &p); err != nil {
			return err
		}
		if err := tx.Where("principal_id = ?", id).Delete(&ConsoleSession{}).Error; err != nil {
			return err
		}
		if err := tx.Where("principal_id = ?", id).Delete(&APIKey{}).Error; err != nil {
			return err
		}
		if err := tx.Where("principal_id = ?", id).Delete(&Identity{}).Error; err != nil {
			return err
		}
		return tx.Delete(&Principal{}, id).Error
	})
	if err != nil {
		return nil, fmt.Errorf("delete principal %d: %w", id, err)
	}
	return &p, nil
}

// guardPrincipal loads principal id into p and runs guard on it, under the
// lock key revocations take, so changes that could lock the admins out
// happen one at a time.
func (s *Store) guardPrincipal(tx *gorm.DB, id uint, guard PrincipalGuard, p *Principal) error {
	if err := s.dialect.serialize(tx, "revoke-keys"); err != nil {
		return err
	}
	if err := tx.First(p, id).Error; err != nil {
		return notFound(err, "principal %d", id)
	}
	others, err := activeAdminKeys(tx, p.ID, 0)
	if err != nil {
		return err
	}
	return guard(p, others)
}
