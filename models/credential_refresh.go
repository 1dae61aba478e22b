package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// ClaimRefresh takes the refresh lease of credential id at version until
// until: true when this caller won it (no one held an unexpired lease and
// the credential is still at version), false when another caller holds it
// or the credential moved on. Across a cluster, one caller refreshes.
func (s *Store) ClaimRefresh(ctx context.Context, id, version uint, now, until time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Model(&Credential{}).
		Where("id = ? AND version = ? AND (refresh_until IS NULL OR refresh_until <= ?)", id, version, now).
		Update("refresh_until", until)
	if res.Error != nil {
		return false, fmt.Errorf("claim the refresh of credential %d: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// Refreshed stores the new sealed tokens of c (read at version), moving
// Version on and releasing the lease; ErrCredentialMoved when c is no
// longer at version (the person connected again, or disconnected).
func (s *Store) Refreshed(ctx context.Context, c *Credential, version uint) error {
	res := s.db.WithContext(ctx).Model(&Credential{}).Where("id = ? AND version = ?", c.ID, version).
		Updates(map[string]any{"sealed": c.Sealed, "expires_at": c.ExpiresAt, "scopes": c.Scopes,
			"version": gorm.Expr("version + 1"), "refresh_until": nil, "last_error": "", "updated_at": time.Now()})
	if res.Error != nil {
		return fmt.Errorf("store the refreshed credential %d: %w", c.ID, res.Error)
	}
	if res.RowsAffected != 1 {
		return ErrCredentialMoved
	}
	c.Version = version + 1
	return nil
}

// RefreshFailed releases the lease of credential id at version and
// records why the refresh failed, for the person's console; the service
// decides whether the row still works (a transient failure) or the
// person must connect again.
func (s *Store) RefreshFailed(ctx context.Context, id, version uint, why string) error {
	err := s.db.WithContext(ctx).Model(&Credential{}).Where("id = ? AND version = ?", id, version).
		Updates(map[string]any{"refresh_until": nil, "last_error": clip(why, 512)}).Error
	if err != nil {
		return fmt.Errorf("release the refresh of credential %d: %w", id, err)
	}
	return nil
}

// CredentialByID reads a credential again (a waiter looking for the
// version a refresh wrote); ErrNotFound when it is gone.
func (s *Store) CredentialByID(ctx context.Context, id uint) (*Credential, error) {
	var c Credential
	if err := s.db.WithContext(ctx).First(&c, id).Error; err != nil {
		return nil, notFound(err, "credential %d", id)
	}
	return &c, nil
}
