package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Audit actions of people's connected accounts at upstream servers
// (services/connect): connected, disconnected, and a refresh the upstream
// refused (the person must connect again). Details never hold a token.
const (
	AuditConnectionConnect       = "connection.connect"
	AuditConnectionDisconnect    = "connection.disconnect"
	AuditConnectionRefreshFailed = "connection.refresh_failed"
)

// ConnectState is a person's connect flow that has left for an upstream's
// authorization server and not yet come back. It is stored, not held in
// memory, so whichever instance the browser returns to can finish it; it
// is finished once (UseConnectState) and only by the principal and the
// console session that started it.
//
// Nothing in it finishes the flow for a reader of the database: the state
// and the session binding are stored as SHA-256 hashes, and the PKCE
// verifier is sealed by the vault.
type ConnectState struct {
	StateHash   string `gorm:"primaryKey;size:64"`
	PrincipalID uint   `gorm:"not null;index"`
	// Server is the upstream's name.
	Server string `gorm:"size:64;not null"`
	// BindHash is the SHA-256 of what ties the flow to the console
	// session that started it.
	BindHash string `gorm:"size:64;not null"`
	// Verifier is the PKCE code verifier, sealed.
	Verifier  []byte    `gorm:"not null"`
	CreatedAt time.Time `gorm:"not null"`
	ExpiresAt time.Time `gorm:"not null;index"`
	// UsedAt is when the flow was finished: a state is good once.
	UsedAt *time.Time
}

// CreateConnectState stores a flow that is leaving for the authorization
// server.
func (s *Store) CreateConnectState(ctx context.Context, c *ConnectState) error {
	if err := s.db.WithContext(ctx).Create(c).Error; err != nil {
		return fmt.Errorf("store the pending connection: %w", err)
	}
	return nil
}

// UseConnectState marks the flow of a state's hash used and returns it,
// when it is unused, unexpired, and the principal's and session's (bind)
// own. Of two callbacks with the same state one wins; the conditional
// update is the claim. A refusal (ErrNotFound, ErrForbidden or
// ErrConflict, saying why) changes nothing: a state another person tries
// stays usable by its owner.
func (s *Store) UseConnectState(ctx context.Context, stateHash string, principal uint, bindHash string, now time.Time) (*ConnectState, error) {
	db := s.db.WithContext(ctx)
	res := db.Model(&ConnectState{}).
		Where("state_hash = ? AND principal_id = ? AND bind_hash = ? AND used_at IS NULL AND expires_at > ?", stateHash, principal, bindHash, now).
		Update("used_at", now)
	if res.Error != nil {
		return nil, fmt.Errorf("claim the pending connection: %w", res.Error)
	}
	var c ConnectState
	err := db.Where("state_hash = ?", stateHash).First(&c).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return nil, ErrNotFound.Errorf("no connection is waiting for that state: start connecting again")
	case err != nil:
		return nil, fmt.Errorf("read the pending connection: %w", err)
	case res.RowsAffected == 1:
		return &c, nil
	case c.PrincipalID != principal || c.BindHash != bindHash:
		return nil, ErrForbidden.Errorf("this connection was started by another person or in another session: start connecting again from your own console")
	case c.UsedAt != nil:
		return nil, ErrConflict.Errorf("this connection was already finished (a state works once): start connecting again")
	default:
		return nil, ErrNotFound.Errorf("this connection expired (it has %s): start connecting again", ConnectStateTTL)
	}
}

// ConnectStateTTL is how long a person has to sign in at the upstream.
const ConnectStateTTL = 10 * time.Minute

// DeleteExpiredConnectStates removes flows that ended or never came back.
func (s *Store) DeleteExpiredConnectStates(ctx context.Context, now time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("expires_at <= ?", now).Delete(&ConnectState{})
	if res.Error != nil {
		return 0, fmt.Errorf("prune pending connections: %w", res.Error)
	}
	return res.RowsAffected, nil
}
