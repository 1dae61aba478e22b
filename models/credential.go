package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Credential kinds.
const (
	// CredentialOAuth is a person's connected account at an OAuth-protected
	// upstream: Name is the upstream's, Sealed its tokens.
	CredentialOAuth = "oauth"
	// CredentialSecret is a value a person stores for themselves, filled
	// into {{user.secret.NAME}}: Name is NAME, Sealed the value.
	CredentialSecret = "secret"
)

// Credential is something that lets Toolbelt act as one person elsewhere.
// Its secret part is sealed by the vault (services/vault) with the row's
// principal, kind and name as associated data, so a copy of the database
// reads nothing, and a sealed value moved to another row opens nowhere.
type Credential struct {
	ID          uint   `gorm:"primaryKey" json:"-"`
	PrincipalID uint   `gorm:"not null;uniqueIndex:idx_credentials_owner,priority:1" json:"principal_id"`
	Kind        string `gorm:"size:8;not null;uniqueIndex:idx_credentials_owner,priority:2" json:"kind"`
	Name        string `gorm:"size:64;not null;uniqueIndex:idx_credentials_owner,priority:3" json:"name"`
	Sealed      []byte `gorm:"not null" json:"-"`
	// Account is who the person is at the upstream, as it said (for the
	// person to recognise; never enforced); Scopes what it granted.
	Account string   `gorm:"size:255;not null;default:''" json:"account,omitempty"`
	Scopes  []string `gorm:"serializer:json" json:"scopes,omitempty"`
	// ExpiresAt is when the sealed access token expires (oauth).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Version moves on each time Sealed changes (a refresh): a refresh
	// writes only over the version it read.
	Version uint `gorm:"not null;default:1" json:"-"`
	// RefreshUntil, while in the future, says one instance is refreshing
	// the token: others wait for the new Version instead of refreshing too.
	RefreshUntil *time.Time `json:"-"`
	// LastError is why the last refresh failed ('' after one succeeded).
	LastError string    `gorm:"size:512;not null;default:''" json:"last_error,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// PutCredential stores c, replacing the principal's credential of the
// same kind and name (a person connecting again, or storing another
// value).
func (s *Store) PutCredential(ctx context.Context, c *Credential) error {
	now := time.Now()
	set := map[string]any{"sealed": c.Sealed, "account": c.Account, "scopes": c.Scopes,
		"expires_at": c.ExpiresAt, "version": gorm.Expr("credentials.version + 1"), "refresh_until": nil, "last_error": "",
		"updated_at": now}
	if c.Kind == CredentialOAuth {
		// Connecting again is a new connection: "since" starts again. A
		// secret replaced keeps when it was first stored.
		set["created_at"] = now
	}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "principal_id"}, {Name: "kind"}, {Name: "name"}},
		DoUpdates: clause.Assignments(set),
	}).Create(c).Error
	if err != nil {
		return fmt.Errorf("store the %s credential %s of principal %d: %w", c.Kind, c.Name, c.PrincipalID, err)
	}
	return nil
}

// CredentialOf returns the principal's credential of kind and name;
// ErrNotFound when there is none.
func (s *Store) CredentialOf(ctx context.Context, principal uint, kind, name string) (*Credential, error) {
	var c Credential
	err := s.db.WithContext(ctx).Where("principal_id = ? AND kind = ? AND name = ?", principal, kind, name).First(&c).Error
	if err != nil {
		return nil, notFound(err, "%s credential %q", kind, name)
	}
	return &c, nil
}

// CredentialsOf lists the principal's credentials of kind (all when kind is empty),
// by name.
func (s *Store) CredentialsOf(ctx context.Context, principal uint, kind string) ([]Credential, error) {
	q := s.db.WithContext(ctx).Where("principal_id = ?", principal)
	if kind != "" {
		q = q.Where("kind = ?", kind)
	}
	var out []Credential
	if err := q.Order("kind, name").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list the credentials of principal %d: %w", principal, err)
	}
	return out, nil
}

// DeleteCredential deletes the principal's credential of kind and name,
// returning it; ErrNotFound when there was none.
func (s *Store) DeleteCredential(ctx context.Context, principal uint, kind, name string) (*Credential, error) {
	gone, err := s.deleteCredentials(ctx, "principal_id = ? AND kind = ? AND name = ?", principal, kind, name)
	if err != nil {
		return nil, fmt.Errorf("delete the %s credential %s of principal %d: %w", kind, name, principal, err)
	}
	if len(gone) == 0 {
		return nil, ErrNotFound.Errorf("%s credential %q", kind, name)
	}
	return &gone[0], nil
}

// DeleteCredentialsOf deletes every credential of the principal (it was
// disabled or deleted), returning them for revocation upstream.
func (s *Store) DeleteCredentialsOf(ctx context.Context, principal uint) ([]Credential, error) {
	gone, err := s.deleteCredentials(ctx, "principal_id = ?", principal)
	if err != nil {
		return nil, fmt.Errorf("delete the credentials of principal %d: %w", principal, err)
	}
	return gone, nil
}

// deleteCredentials deletes the rows where says, returning what each
// held, in one transaction.
func (s *Store) deleteCredentials(ctx context.Context, where string, args ...any) ([]Credential, error) {
	var gone []Credential
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where(where, args...).Find(&gone).Error; err != nil {
			return err
		}
		if len(gone) == 0 {
			return nil
		}
		ids := make([]uint, len(gone))
		for i, c := range gone {
			ids[i] = c.ID
		}
		return tx.Delete(&Credential{}, ids).Error
	})
	return gone, err
}

// ConnectedCounts is, per upstream, how many principals have connected
// their account.
func (s *Store) ConnectedCounts(ctx context.Context) (map[string]int, error) {
	var rows []struct {
		Name string
		N    int
	}
	err := s.db.WithContext(ctx).Model(&Credential{}).Select("name, count(*) AS n").
		Where("kind = ?", CredentialOAuth).Group("name").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("count connected accounts: %w", err)
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.Name] = r.N
	}
	return out, nil
}

// ErrCredentialMoved is a refresh's answer when the credential changed
// since it was read (another instance refreshed it, or the person
// connected again): read it again.
var ErrCredentialMoved = errors.New("credential changed meanwhile")
