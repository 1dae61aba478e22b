package vault

import (
	"context"
	"fmt"

	"toolbelt/models"
)

// UpstreamClientData is the associated data an upstream's client secret
// (Upstream.AuthSecret) is sealed with.
func UpstreamClientData(u *models.Upstream) []string {
	return []string{"upstream-client", u.Name}
}

// Rotate seals every sealed value of the database anew under the vault's
// sealing key (its first), in one transaction, and says how many it
// sealed anew: after it, the keys after the first can be dropped. It
// refuses, changing nothing, when the vault does not open the canary or
// any one value (a key missing from the list).
func (v *Vault) Rotate(ctx context.Context, store *models.Store) (models.ResealCounts, error) {
	if err := v.Check(ctx, store); err != nil {
		return models.ResealCounts{}, err
	}
	return store.Reseal(ctx, models.Reseal{
		Credential: func(c *models.Credential) ([]byte, error) {
			return v.reseal(c.Sealed, CredentialData(c)...)
		},
		Upstream: func(u *models.Upstream) ([]byte, error) {
			return v.reseal(u.AuthSecret, UpstreamClientData(u)...)
		},
		SettingKey: CanarySetting,
		Setting:    v.resealCanary,
	})
}

// reseal opens sealed and seals it under the sealing key; nil when it is
// sealed under it already.
func (v *Vault) reseal(sealed []byte, aad ...string) ([]byte, error) {
	plain, err := v.Open(sealed, aad...)
	if err != nil {
		return nil, fmt.Errorf("%w: sealed under a key the list does not hold", err)
	}
	if v.Sealer(sealed) {
		return nil, nil
	}
	return v.Seal(plain, aad...)
}
