package models

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
)

// Identity links a person at an external OpenID provider (issuer +
// subject, which the provider never reassigns) to the principal made for
// them at their first sign-in. Email, name and groups are what the
// provider said last, for admins to recognise the person; the principal's
// role, not these, is what Toolbelt enforces.
type Identity struct {
	ID          uint      `gorm:"primaryKey" json:"id"`
	Issuer      string    `gorm:"size:255;not null;uniqueIndex:idx_identities_issuer_subject,priority:1" json:"issuer"`
	Subject     string    `gorm:"size:255;not null;uniqueIndex:idx_identities_issuer_subject,priority:2" json:"subject"`
	PrincipalID uint      `gorm:"not null;index" json:"principal_id"`
	Email       string    `gorm:"size:255;not null;default:''" json:"email,omitempty"`
	Name        string    `gorm:"size:255;not null;default:''" json:"name,omitempty"`
	Groups      []string  `gorm:"serializer:json" json:"groups,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	LastSeenAt  time.Time `json:"last_seen_at"`
}

// Same reports whether o carries the same email, name and groups as i.
func (i *Identity) Same(o *Identity) bool {
	return i.Email == o.Email && i.Name == o.Name && slices.Equal(i.Groups, o.Groups)
}

// IdentityBySubject returns the identity of subject at issuer with its
// principal; ErrNotFound when the person has not signed in before.
func (s *Store) IdentityBySubject(ctx context.Context, issuer, subject string) (*Identity, *Principal, error) {
	var id Identity
	err := s.db.WithContext(ctx).Where("issuer = ? AND subject = ?", issuer, subject).First(&id).Error
	if err != nil {
		return nil, nil, notFound(err, "identity %q at %s", subject, issuer)
	}
	p, err := s.PrincipalByID(ctx, id.PrincipalID)
	if err != nil {
		return nil, nil, err
	}
	return &id, p, nil
}

// ErrIdentityTaken is CreateIdentityPrincipal's answer when the identity
// was linked meanwhile (the same person signing in twice at once).
var ErrIdentityTaken = ErrConflict.Errorf("identity already linked")

// CreateIdentityPrincipal stores a principal with no API key and its
// identity in one transaction. A principal name in use is ErrConflict
// naming it; an identity already linked is ErrIdentityTaken.
func (s *Store) CreateIdentityPrincipal(ctx context.Context, p *Principal, id *Identity) error {
	var taken error
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Omit("Keys").Create(p).Error; err != nil {
			if errors.Is(err, gorm.ErrDuplicatedKey) {
				taken = ErrConflict.Errorf("principal %q", p.Name)
			}
			return err
		}
		id.PrincipalID = p.ID
		if err := tx.Create(id).Error; err != nil {
			if errors.Is(err, gorm.ErrDuplicatedKey) {
				taken = ErrIdentityTaken
			}
			return err
		}
		return nil
	})
	if taken != nil {
		return taken
	}
	if err != nil {
		return fmt.Errorf("create principal %q for %s: %w", p.Name, id.Subject, err)
	}
	return nil
}

// TouchIdentity records what the provider said of the person at their
// latest sign-in.
func (s *Store) TouchIdentity(ctx context.Context, id *Identity) error {
	err := s.db.WithContext(ctx).Model(&Identity{}).Where("id = ?", id.ID).
		Select("email", "name", "groups", "last_seen_at").Updates(id).Error
	if err != nil {
		return fmt.Errorf("update identity %d: %w", id.ID, err)
	}
	return nil
}

// Identities lists the identities linked to a principal.
func (s *Store) Identities(ctx context.Context, principalID uint) ([]Identity, error) {
	var ids []Identity
	if err := s.db.WithContext(ctx).Where("principal_id = ?", principalID).Order("id").Find(&ids).Error; err != nil {
		return nil, fmt.Errorf("list identities: %w", err)
	}
	return ids, nil
}

// SetPrincipalRole changes a principal's role. guard runs in the
// transaction as for SetPrincipalDisabled, so the last admin with a
// working key cannot be demoted by a race.
func (s *Store) SetPrincipalRole(ctx context.Context, id uint, role string, guard PrincipalGuard) (*Principal, error) {
	var p Principal
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := s.guardPrincipal(tx, id, guard, &p); err != nil {
			return err
		}
		p.Role = role
		return tx.Model(&p).Update("role", role).Error
	})
	if err != nil {
		return nil, fmt.Errorf("update principal %d: %w", id, err)
	}
	return &p, nil
}
