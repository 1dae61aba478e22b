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

// ResealCounts is how many values Reseal sealed anew.
type ResealCounts struct {
	Credentials int `json:"credentials"`
	Upstreams   int `json:"upstream_client_secrets"`
	Settings    int `json:"settings"`
}

// Reseal seals every vault-sealed value of the database anew (a vault key
// rotation), in one transaction: every value is under the new key, or,
// when one fails, none moved. A credential's Version does not move: its
// token is the same, and a refresh in flight still writes over it.
func (s *Store) Reseal(ctx context.Context, r Reseal) (ResealCounts, error) {
	var n ResealCounts
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var creds []Credential
		if err := tx.Order("id").Find(&creds).Error; err != nil {
			return err
		}
		for i := range creds {
			c := &creds[i]
			sealed, err := r.Credential(c)
			if err != nil {
				return fmt.Errorf("the %s credential %s of principal %d: %w", c.Kind, c.Name, c.PrincipalID, err)
			}
			if sealed == nil {
				continue
			}
			if err := tx.Model(&Credential{}).Where("id = ?", c.ID).Update("sealed", sealed).Error; err != nil {
				return err
			}
			n.Credentials++
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
