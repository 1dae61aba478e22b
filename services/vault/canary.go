package vault

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"toolbelt/models"
)

// CanarySetting is the setting holding the canary: a known text sealed
// at the first start, opened at every start after.
const CanarySetting = "vault_canary"

// canaryText is what the canary seals; canaryData its associated data.
const canaryText = "toolbelt vault canary"

var canaryData = []string{"vault canary"}

// ErrWrongKey is Check's answer when the vault's keys do not open what
// the database holds sealed.
var ErrWrongKey = errors.New("the vault key does not open this database's sealed values")

// Check opens the canary the first start over the database sealed (and
// seals it when there is none yet): a vault that cannot open it holds
// another key than the one the database's tokens and secrets were sealed
// with, and a server started with it would answer "not connected" to
// every person, or fail each call, instead of saying why once. The error
// names the setting or file the key came from and what to do, never the
// key.
func (v *Vault) Check(ctx context.Context, store *models.Store) error {
	sealed, err := v.Seal([]byte(canaryText), canaryData...)
	if err != nil {
		return err
	}
	stored, err := store.SettingOnce(ctx, CanarySetting, base64.StdEncoding.EncodeToString(sealed))
	if err != nil {
		return err
	}
	if v.openCanary(stored) == nil {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrWrongKey, v.wrongKeyAdvice())
}

// openCanary opens the stored canary.
func (v *Vault) openCanary(stored string) error {
	raw, err := base64.StdEncoding.DecodeString(stored)
	if err != nil {
		return ErrOpen
	}
	plain, err := v.Open(raw, canaryData...)
	if err != nil || string(plain) != canaryText {
		return ErrOpen
	}
	return nil
}

// wrongKeyAdvice says where the key that failed came from and what to do.
func (v *Vault) wrongKeyAdvice() string {
	const lost = "If that key is lost, what it sealed is lost with it: see docs/identity-vault.md (\"Losing the key\")."
	switch v.source {
	case sourceFileMade:
		return fmt.Sprintf("TOOLBELT_VAULT_KEY is unset, so this start made a new key file %s, but the database was sealed under another key "+
			"(another instance's, or the database was restored from elsewhere). Set TOOLBELT_VAULT_KEY to the key the other instances use, "+
			"or copy their vault.key over %s. %s", v.path, v.path, lost)
	case sourceFile:
		return fmt.Sprintf("TOOLBELT_VAULT_KEY is unset and the key file %s holds another key than the one the database was sealed under. "+
			"Put back the vault.key that belongs to this database, or set TOOLBELT_VAULT_KEY to its key. %s", v.path, lost)
	case sourceSetting:
		return "none of the keys in TOOLBELT_VAULT_KEY is the one the database was sealed under. Set it to that key " +
			"(while rotating: \"new,old\", then run \"toolbelt vault rotate\"). " + lost
	}
	return "the vault holds another key than the one the database was sealed under."
}

// resealCanary returns the stored canary sealed anew under the sealing
// key; "" when it is sealed under it already.
func (v *Vault) resealCanary(stored string) (string, error) {
	if err := v.openCanary(stored); err != nil {
		return "", err
	}
	raw, _ := base64.StdEncoding.DecodeString(stored)
	if v.Sealer(raw) {
		return "", nil
	}
	sealed, err := v.Seal([]byte(canaryText), canaryData...)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(sealed), nil
}
