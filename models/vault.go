package models

import (
	"context"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// SettingOnce stores value under key unless a value is stored there
// already, and returns the one stored: of instances starting at once, the
// first to write wins and every one reads its value.
func (s *Store) SettingOnce(ctx context.Context, key, value string) (string, error) {
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&Setting{Key: key, Value: value}).Error
	if err != nil {
		return "", fmt.Errorf("store setting %s: %w", key, err)
	}
	return s.Setting(ctx, key)
}

// Reseal is what Reseal does to each sealed value: it returns the value
// sealed anew, or nil to leave it as it is.
type Reseal struct {
	// Credential reseals a credential's Sealed.
	Credential func(c *Credential) ([]byte, error)
	// Upstream reseals an upstream's AuthSecret (only those with one).
	Upstream func(u *Upstream) ([]byte, error)
	// Setting reseals the value of the setting SettingKey.
	SettingKey string
	Setting    func(value string) (string, error)
}

// resealCredentialTries bounds how often resealCredential reads a
// credential again that a refresh keeps changing under it.
const resealCredentialTries = 5

// resealCredential seals c anew, writing only over the version it read:
// an instance refreshing the token meanwhile (on Postgres, another
// transaction) wrote a new token, which a write of the old one sealed
// anew would lose, so the row is read again and that one sealed anew.
func resealCredential(tx *gorm.DB, c *Credential, reseal func(*Credential) ([]byte, error)) (bool, error) {
	for range resealCredentialTries {
		sealed, err := reseal(c)
		if err != nil {
			return false, fmt.Errorf("the %s credential %s of principal %d: %w", c.Kind, c.Name, c.PrincipalID, err)
		}
		if sealed == nil {
			return false, nil
		}
		res := tx.Model(&Credential{}).Where("id = ? AND version = ?", c.ID, c.Version).Update("sealed", sealed)
		if res.Error != nil || res.RowsAffected == 1 {
			return res.Error == nil, res.Error
		}
		var again []Credential
		if err := tx.Where("id = ?", c.ID).Limit(1).Find(&again).Error; err != nil || len(again) == 0 {
			return false, err // deleted meanwhile: nothing to seal
		}
		*c = again[0]
	}
	return false, fmt.Errorf("the %s credential %s of principal %d kept changing; run the rotation again", c.Kind, c.Name, c.PrincipalID)
}

// ResealCounts is how many values Reseal sealed anew.
type ResealCounts struct {
	Credentials int `json:"credentials"`
	Upstreams   int `json:"upstream_client_secrets"`
	Settings    int `json:"settings"`
}

// Reseal seals every vault-sealed value of the database anew (a vault key
// rotation), in one transaction: every value is under the new key, or,
// when one fails, none moved. A credential's Version does not move: its
// token is the same, and a refresh in flight still writes over it (one
// that lands first is sealed anew in its place: resealCredential).
func (s *Store) Reseal(ctx context.Context, r Reseal) (ResealCounts, error) {
	var n ResealCounts
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var creds []Credential
		if err := tx.Order("id").Find(&creds).Error; err != nil {
			return err
		}
		for i := range creds {
			resealed, err := resealCredential(tx, &creds[i], r.Credential)
			if err != nil {
				return err
			}
			if resealed {
				n.Credentials++
			}
		}
		var ups []Upstream
		if err := tx.Where("auth_secret IS NOT NULL").Order("id").Find(&ups).Error; err != nil {
			return err
		}
		for i := range ups {
			u := &ups[i]
			if len(u.AuthSecret) == 0 {
				continue
			}
			sealed, err := r.Upstream(u)
			if err != nil {
				return fmt.Errorf("the client secret of upstream %s: %w", u.Name, err)
			}
			if sealed == nil {
				continue
			}
			if err := tx.Model(&Upstream{}).Where("id = ?", u.ID).Update("auth_secret", sealed).Error; err != nil {
				return err
			}
			n.Upstreams++
		}
		var st Setting
		err := tx.Where("key = ?", r.SettingKey).Limit(1).Find(&st).Error
		if err != nil || st.Key == "" {
			return err
		}
		value, err := r.Setting(st.Value)
		if err != nil {
			return fmt.Errorf("setting %s: %w", r.SettingKey, err)
		}
		if value != "" {
			if err := tx.Model(&Setting{}).Where("key = ?", r.SettingKey).Update("value", value).Error; err != nil {
				return err
			}
			n.Settings++
		}
		return nil
	})
	if err != nil {
		return ResealCounts{}, fmt.Errorf("seal the vault's values anew: %w", err)
	}
	return n, nil
}
