package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The embedded OAuth authorization server's tables (services/authserver).
// No secret is stored as issued: codes and refresh tokens only as their
// SHA-256, access tokens not at all (they are encrypted token ids), the
// signing key encrypted.

// OAuthClient is a client registered by dynamic client registration: a
// public client (no secret), known by a random id.
type OAuthClient struct {
	ID   string `gorm:"primaryKey;size:255"`
	Name string `gorm:"size:255;not null;default:''"`
	// RedirectURIs and GrantTypes are space-separated.
	RedirectURIs string `gorm:"not null"`
	GrantTypes   string `gorm:"size:255;not null;default:''"`
	CreatedAt    time.Time
}

// OAuthAuthRequest is one authorization request, from /oauth/authorize to
// the code's redemption. It stays after the code is used, marked, so a
// second use is recognised (and revokes what the first issued).
type OAuthAuthRequest struct {
	ID                  string `gorm:"primaryKey;size:64"`
	ClientID            string `gorm:"size:255;not null"`
	RedirectURI         string `gorm:"not null"`
	State               string `gorm:"not null;default:''"`
	Nonce               string `gorm:"not null;default:''"`
	ResponseMode        string `gorm:"size:32;not null;default:''"`
	Scopes              string `gorm:"not null;default:''"`
	Resource            string `gorm:"not null"`
	CodeChallenge       string `gorm:"size:128;not null"`
	CodeChallengeMethod string `gorm:"size:8;not null"`
	// PrincipalID, GrantID and ConsentedAt are set once the person
	// allowed the request.
	PrincipalID *uint
	GrantID     *uint
	ConsentedAt *time.Time
	// CodeHash is the SHA-256 of the code issued; CodeUsedAt when it
	// was redeemed (once only).
	CodeHash   *string `gorm:"size:64;uniqueIndex"`
	CodeUsedAt *time.Time
	CreatedAt  time.Time
	ExpiresAt  time.Time `gorm:"not null;index"`
}

// OAuthGrant is a person's consent to a client: what it may do on their
// behalf, until revoked. One per principal and client.
type OAuthGrant struct {
	ID          uint   `gorm:"primaryKey"`
	PrincipalID uint   `gorm:"not null;uniqueIndex:idx_oauth_grant_client"`
	ClientID    string `gorm:"size:255;not null;uniqueIndex:idx_oauth_grant_client"`
	ClientName  string `gorm:"size:255;not null;default:''"`
	Scopes      string `gorm:"not null;default:''"`
	Resource    string `gorm:"not null;default:''"`
	CreatedAt   time.Time
	LastUsedAt  *time.Time
	RevokedAt   *time.Time
}

// Token kinds.
const (
	OAuthAccess  = "access"
	OAuthRefresh = "refresh"
)

// OAuthToken is an access or refresh token issued. A refresh token is
// found by Hash; an access token by ID (the token is its encryption).
// Family links a refresh token to the one it replaced, back to the code
// that started it: reusing a replaced one revokes them all.
type OAuthToken struct {
	ID            string  `gorm:"primaryKey;size:64"`
	Kind          string  `gorm:"size:8;not null"`
	Hash          *string `gorm:"size:64;uniqueIndex"`
	GrantID       uint    `gorm:"not null;index"`
	AuthRequestID string  `gorm:"size:64;not null;index"`
	FamilyID      string  `gorm:"size:64;not null;index"`
	ParentID      *string `gorm:"size:64"`
	PrincipalID   uint    `gorm:"not null;index"`
	ClientID      string  `gorm:"size:255;not null"`
	Scopes        string  `gorm:"not null;default:''"`
	Audience      string  `gorm:"not null"`
	AuthTime      time.Time
	CreatedAt     time.Time
	ExpiresAt     time.Time `gorm:"not null;index"`
	RevokedAt     *time.Time
	RotatedAt     *time.Time
}

// OAuthKey is the server's token signing key (ID tokens, JWKS), the same
// for every instance: its private key encrypted with TOOLBELT_OAUTH_KEY.
type OAuthKey struct {
	ID         string `gorm:"primaryKey;size:64"`
	Algorithm  string `gorm:"size:16;not null"`
	Encrypted  string `gorm:"not null"`
	CreatedAt  time.Time
	RetiredAt  *time.Time
	Generation int `gorm:"not null;default:0;uniqueIndex"`
}

// CreateOAuthClient stores a registered client.
func (s *Store) CreateOAuthClient(ctx context.Context, c *OAuthClient) error {
	if err := s.db.WithContext(ctx).Create(c).Error; err != nil {
		return fmt.Errorf("register oauth client: %w", err)
	}
	return nil
}

// OAuthClientByID returns a registered client.
func (s *Store) OAuthClientByID(ctx context.Context, id string) (*OAuthClient, error) {
	var c OAuthClient
	if err := s.db.WithContext(ctx).Where("id = ?", id).First(&c).Error; err != nil {
		return nil, notFound(err, "oauth client %q", id)
	}
	return &c, nil
}

// CreateOAuthAuthRequest stores a new authorization request.
func (s *Store) CreateOAuthAuthRequest(ctx context.Context, r *OAuthAuthRequest) error {
	if err := s.db.WithContext(ctx).Create(r).Error; err != nil {
		return fmt.Errorf("store authorization request: %w", err)
	}
	return nil
}

// OAuthAuthRequestByID returns an unexpired authorization request.
func (s *Store) OAuthAuthRequestByID(ctx context.Context, id string, now time.Time) (*OAuthAuthRequest, error) {
	var r OAuthAuthRequest
	if err := s.db.WithContext(ctx).Where("id = ? AND expires_at > ?", id, now).First(&r).Error; err != nil {
		return nil, notFound(err, "authorization request")
	}
	return &r, nil
}

// ConsentOAuthAuthRequest records that a person allowed a request, once
// (a request already answered is ErrConflict), with the scopes granted,
// and upserts the person's grant to the client. seen says the grant
// existed (unrevoked) before.
func (s *Store) ConsentOAuthAuthRequest(ctx context.Context, id string, g *OAuthGrant, now time.Time) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "principal_id"}, {Name: "client_id"}},
			DoUpdates: clause.Assignments(map[string]any{"scopes": g.Scopes, "resource": g.Resource, "client_name": g.ClientName, "revoked_at": nil}),
		}).Create(g).Error
		if err != nil {
			return fmt.Errorf("record consent: %w", err)
		}
		if err := tx.Where("principal_id = ? AND client_id = ?", g.PrincipalID, g.ClientID).First(g).Error; err != nil {
			return fmt.Errorf("record consent: %w", err)
		}
		res := tx.Model(&OAuthAuthRequest{}).Where("id = ? AND consented_at IS NULL AND expires_at > ?", id, now).
			Updates(map[string]any{"principal_id": g.PrincipalID, "grant_id": g.ID, "consented_at": now, "scopes": g.Scopes})
		if res.Error != nil {
			return fmt.Errorf("record consent: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return ErrConflict.Errorf("this authorization request was already answered or expired; start again from the application")
		}
		return nil
	})
}

// DeleteOAuthAuthRequest removes an unanswered authorization request
// (the person denied it).
func (s *Store) DeleteOAuthAuthRequest(ctx context.Context, id string) error {
	if err := s.db.WithContext(ctx).Where("id = ? AND code_hash IS NULL", id).Delete(&OAuthAuthRequest{}).Error; err != nil {
		return fmt.Errorf("delete authorization request: %w", err)
	}
	return nil
}

// SetOAuthCode records the hash of the code issued for a consented
// request.
func (s *Store) SetOAuthCode(ctx context.Context, id, codeHash string) error {
	res := s.db.WithContext(ctx).Model(&OAuthAuthRequest{}).Where("id = ? AND consented_at IS NOT NULL AND code_hash IS NULL", id).
		Update("code_hash", codeHash)
	if res.Error != nil {
		return fmt.Errorf("store authorization code: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrConflict.Errorf("authorization request %s has no consent or a code already", id)
	}
	return nil
}

// ErrCodeReused is a code redeemed a second time.
var ErrCodeReused = ErrUnauthorized.Errorf("authorization code already used")

// ClaimOAuthCode marks the code of hash used and returns its request,
// exactly once: a code already used is ErrCodeReused and revokes every
// token issued from it, a code unknown or expired ErrNotFound.
func (s *Store) ClaimOAuthCode(ctx context.Context, codeHash string, now time.Time) (*OAuthAuthRequest, error) {
	db := s.db.WithContext(ctx)
	res := db.Model(&OAuthAuthRequest{}).Where("code_hash = ? AND code_used_at IS NULL AND expires_at > ?", codeHash, now).
		Update("code_used_at", now)
	if res.Error != nil {
		return nil, fmt.Errorf("redeem authorization code: %w", res.Error)
	}
	var r OAuthAuthRequest
	if err := db.Where("code_hash = ?", codeHash).First(&r).Error; err != nil {
		return nil, notFound(err, "authorization code")
	}
	if res.RowsAffected == 1 {
		return &r, nil
	}
	if r.CodeUsedAt == nil {
		return nil, ErrNotFound.Errorf("authorization code expired")
	}
	if _, err := s.RevokeOAuthTokens(ctx, "auth_request_id = ?", r.ID, now); err != nil {
		return nil, err
	}
	return nil, ErrCodeReused
}

// CreateOAuthTokens stores tokens just issued and marks their grant used.
func (s *Store) CreateOAuthTokens(ctx context.Context, ts ...*OAuthToken) error {
	if len(ts) == 0 {
		return nil
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, t := range ts {
			if err := tx.Create(t).Error; err != nil {
				return fmt.Errorf("store token: %w", err)
			}
		}
		return tx.Model(&OAuthGrant{}).Where("id = ?", ts[0].GrantID).Update("last_used_at", ts[0].CreatedAt).Error
	})
}

// OAuthTokenByID returns a token, revoked or not, with its principal (nil
// when deleted).
func (s *Store) OAuthTokenByID(ctx context.Context, id string) (*OAuthToken, *Principal, error) {
	var t OAuthToken
	if err := s.db.WithContext(ctx).Where("id = ?", id).First(&t).Error; err != nil {
		return nil, nil, notFound(err, "token")
	}
	p, err := s.PrincipalByID(ctx, t.PrincipalID)
	if errors.Is(err, ErrNotFound) {
		return &t, nil, nil
	}
	return &t, p, err
}

// OAuthTokenByHash returns the refresh token of hash.
func (s *Store) OAuthTokenByHash(ctx context.Context, hash string) (*OAuthToken, error) {
	var t OAuthToken
	if err := s.db.WithContext(ctx).Where("hash = ?", hash).First(&t).Error; err != nil {
		return nil, notFound(err, "refresh token")
	}
	return &t, nil
}

// RotateOAuthToken marks a refresh token replaced, once: false when it
// already was (or was revoked) — a concurrent reuse.
func (s *Store) RotateOAuthToken(ctx context.Context, id string, now time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Model(&OAuthToken{}).Where("id = ? AND rotated_at IS NULL AND revoked_at IS NULL", id).
		Update("rotated_at", now)
	if res.Error != nil {
		return false, fmt.Errorf("rotate refresh token: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// RevokeOAuthTokens revokes the unrevoked tokens matching where (a column
// condition with one argument) and returns how many.
func (s *Store) RevokeOAuthTokens(ctx context.Context, where string, arg any, now time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Model(&OAuthToken{}).Where(where, arg).Where("revoked_at IS NULL").Update("revoked_at", now)
	if res.Error != nil {
		return 0, fmt.Errorf("revoke tokens: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// OAuthGrantFor returns a principal's unrevoked grant to a client.
func (s *Store) OAuthGrantFor(ctx context.Context, principalID uint, clientID string) (*OAuthGrant, error) {
	var g OAuthGrant
	err := s.db.WithContext(ctx).Where("principal_id = ? AND client_id = ? AND revoked_at IS NULL", principalID, clientID).First(&g).Error
	if err != nil {
		return nil, notFound(err, "grant")
	}
	return &g, nil
}

// OAuthGrants returns the unrevoked grants, newest use first.
func (s *Store) OAuthGrants(ctx context.Context) ([]OAuthGrant, error) {
	var gs []OAuthGrant
	err := s.db.WithContext(ctx).Where("revoked_at IS NULL").Order("principal_id, created_at DESC").Find(&gs).Error
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	return gs, nil
}

// RevokeOAuthGrant revokes a grant and every token issued under it.
func (s *Store) RevokeOAuthGrant(ctx context.Context, id uint, now time.Time) (*OAuthGrant, error) {
	var g OAuthGrant
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("id = ? AND revoked_at IS NULL", id).First(&g).Error; err != nil {
			return notFound(err, "grant %d", id)
		}
		if err := tx.Model(&g).Update("revoked_at", now).Error; err != nil {
			return err
		}
		return tx.Model(&OAuthToken{}).Where("grant_id = ? AND revoked_at IS NULL", id).Update("revoked_at", now).Error
	})
	if err != nil {
		return nil, fmt.Errorf("revoke grant %d: %w", id, err)
	}
	return &g, nil
}

// OAuthSigningKey returns the current signing key, storing the one make
// returns first when there is none (the first instance to start makes
// it; the others, and every later start, read it).
func (s *Store) OAuthSigningKey(ctx context.Context, make func() (*OAuthKey, error)) (*OAuthKey, error) {
	db := s.db.WithContext(ctx)
	var cur OAuthKey
	err := db.Where("retired_at IS NULL").Order("generation DESC").First(&cur).Error
	if err == nil {
		return &cur, nil
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	k, err := make()
	if err != nil {
		return nil, err
	}
	if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(k).Error; err != nil {
		return nil, fmt.Errorf("store signing key: %w", err)
	}
	if err := db.Where("retired_at IS NULL").Order("generation DESC").First(&cur).Error; err != nil {
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	return &cur, nil
}

// DeleteExpiredOAuth removes authorization requests and tokens expired
// before cutoff.
func (s *Store) DeleteExpiredOAuth(ctx context.Context, cutoff time.Time) error {
	db := s.db.WithContext(ctx)
	if err := db.Where("expires_at <= ?", cutoff).Delete(&OAuthAuthRequest{}).Error; err != nil {
		return fmt.Errorf("prune authorization requests: %w", err)
	}
	if err := db.Where("expires_at <= ?", cutoff).Delete(&OAuthToken{}).Error; err != nil {
		return fmt.Errorf("prune tokens: %w", err)
	}
	return nil
}
