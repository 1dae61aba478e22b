package models

import (
	"cmp"
	"context"
	"fmt"
	"time"
)

// ConsoleSession is a signed-in browser of the admin console. Only the
// SHA-256 of the cookie's token is stored. A session opened with an API
// key lives only as long as the key stays active; one opened through the
// identity provider (KeyID 0, IdentityID set) as long as its principal
// stays enabled.
type ConsoleSession struct {
	Hash        string    `gorm:"primaryKey;size:64"`
	PrincipalID uint      `gorm:"not null;index"`
	KeyID       uint      `gorm:"not null;index"`
	CreatedAt   time.Time `gorm:"not null"`
	ExpiresAt   time.Time `gorm:"not null;index"`
	// IdentityID is the identity (identities) an SSO sign-in opened the
	// session as; nil for a key's session.
	IdentityID *uint `gorm:"index"`
	// Person names that identity as the provider did at sign-in
	// (PersonName), for the audit log of what the session does.
	Person string `gorm:"size:300;not null;default:''"`
	// KeyLabel is the label (or prefix) of the key, read with the session
	// for the audit log; not a column.
	KeyLabel string `gorm:"-"`
}

// CreateConsoleSession stores a new session.
func (s *Store) CreateConsoleSession(ctx context.Context, cs *ConsoleSession) error {
	if err := s.db.WithContext(ctx).Create(cs).Error; err != nil {
		return fmt.Errorf("create console session: %w", err)
	}
	return nil
}

// ConsoleSessionByHash returns an unexpired session whose key is still
// active (or that SSO opened), of an enabled principal, with the principal.
func (s *Store) ConsoleSessionByHash(ctx context.Context, hash string, now time.Time) (*ConsoleSession, *Principal, error) {
	var cs ConsoleSession
	err := s.db.WithContext(ctx).
		Where("hash = ? AND expires_at > ?", hash, now).
		Where("(key_id IN (SELECT id FROM api_keys WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?))"+
			" OR (key_id = 0 AND identity_id IS NOT NULL))", now).
		Where("principal_id IN (SELECT id FROM principals WHERE disabled_at IS NULL)").
		First(&cs).Error
	if err != nil {
		return nil, nil, notFound(err, "console session")
	}
	p, err := s.PrincipalByID(ctx, cs.PrincipalID)
	if err != nil {
		return nil, nil, err
	}
	if cs.KeyID == 0 {
		return &cs, p, nil
	}
	var key APIKey
	if err := s.db.WithContext(ctx).Select("prefix", "label").First(&key, cs.KeyID).Error; err != nil {
		return nil, nil, notFound(err, "console session")
	}
	cs.KeyLabel = cmp.Or(key.Label, key.Prefix)
	return &cs, p, nil
}

// ActiveConsoleSessions lists the sessions not yet expired, newest
// first, at most limit.
func (s *Store) ActiveConsoleSessions(ctx context.Context, now time.Time, limit int) ([]ConsoleSession, error) {
	var out []ConsoleSession
	if err := s.db.WithContext(ctx).Where("expires_at > ?", now).Order("created_at DESC").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list console sessions: %w", err)
	}
	return out, nil
}

// DeleteConsoleSession ends a session; ending an unknown one is no error.
func (s *Store) DeleteConsoleSession(ctx context.Context, hash string) error {
	if err := s.db.WithContext(ctx).Where("hash = ?", hash).Delete(&ConsoleSession{}).Error; err != nil {
		return fmt.Errorf("end console session: %w", err)
	}
	return nil
}

// DeleteConsoleSessionOf ends principalID's session of hash; a session
// that is not theirs (or gone) is ErrNotFound.
func (s *Store) DeleteConsoleSessionOf(ctx context.Context, principalID uint, hash string) error {
	res := s.db.WithContext(ctx).Where("hash = ? AND principal_id = ?", hash, principalID).Delete(&ConsoleSession{})
	if res.Error != nil {
		return fmt.Errorf("end console session: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrNotFound.Errorf("principal %d has no such console session (it ended already?)", principalID)
	}
	return nil
}

// DeleteExpiredConsoleSessions removes sessions past their expiry.
func (s *Store) DeleteExpiredConsoleSessions(ctx context.Context, now time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("expires_at <= ?", now).Delete(&ConsoleSession{})
	if res.Error != nil {
		return 0, fmt.Errorf("prune console sessions: %w", res.Error)
	}
	return res.RowsAffected, nil
}
