package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// OIDCLogin is a console sign-in through the identity provider that has
// left for the provider and not yet come back. It is stored, not held in
// memory, so whichever instance of a cluster the browser returns to can
// finish it; it is consumed once (TakeOIDCLogin).
//
// Nothing in it lets a reader of the database finish the sign-in: the
// state is stored as its SHA-256, the nonce too, and the PKCE verifier is
// not stored at all: the browser that started the sign-in holds it in an
// HttpOnly cookie and VerifierHash is its SHA-256, which also binds the
// sign-in to that browser (a callback URL replayed in another browser
// carries no verifier).
type OIDCLogin struct {
	StateHash    string    `gorm:"primaryKey;size:64"`
	NonceHash    string    `gorm:"size:64;not null"`
	VerifierHash string    `gorm:"size:64;not null"`
	Next         string    `gorm:"size:2000;not null;default:''"`
	CreatedAt    time.Time `gorm:"not null"`
	ExpiresAt    time.Time `gorm:"not null;index"`
}

// CreateOIDCLogin stores a sign-in that is leaving for the provider.
func (s *Store) CreateOIDCLogin(ctx context.Context, l *OIDCLogin) error {
	if err := s.db.WithContext(ctx).Create(l).Error; err != nil {
		return fmt.Errorf("store the pending sign-in: %w", err)
	}
	return nil
}

// TakeOIDCLogin removes and returns the unexpired pending sign-in of a
// state's hash. Of two callbacks with the same state (a replay, or two
// instances racing) one gets it and the other ErrNotFound: the delete
// that finds the row is the claim.
func (s *Store) TakeOIDCLogin(ctx context.Context, stateHash string, now time.Time) (*OIDCLogin, error) {
	var l OIDCLogin
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("state_hash = ? AND expires_at > ?", stateHash, now).First(&l).Error; err != nil {
			return err
		}
		res := tx.Where("state_hash = ?", stateHash).Delete(&OIDCLogin{})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return gorm.ErrRecordNotFound
		}
		return nil
	})
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound.Errorf("no sign-in is waiting for that state")
	}
	if err != nil {
		return nil, fmt.Errorf("take the pending sign-in: %w", err)
	}
	return &l, nil
}

// DeleteExpiredOIDCLogins removes sign-ins that never came back.
func (s *Store) DeleteExpiredOIDCLogins(ctx context.Context, now time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("expires_at <= ?", now).Delete(&OIDCLogin{})
	if res.Error != nil {
		return 0, fmt.Errorf("prune pending sign-ins: %w", res.Error)
	}
	return res.RowsAffected, nil
}
