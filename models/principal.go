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
}

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

// KeyByHash finds an active key and its principal for authentication.
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
// key's principal and the number of active admin keys, so the last way
// into the system cannot be revoked by a race.
func (s *Store) RevokeAPIKey(ctx context.Context, id uint, guard func(owner *Principal, activeAdminKeys int64) error) (*APIKey, error) {
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
		var adminKeys int64
		err := tx.Model(&APIKey{}).
			Joins("JOIN principals ON principals.id = api_keys.principal_id").
			Where("principals.role = ? AND api_keys.revoked_at IS NULL", "admin").
			Count(&adminKeys).Error
		if err != nil {
			return err
		}
		if err := guard(&owner, adminKeys); err != nil {
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
