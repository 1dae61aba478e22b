package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"toolbelt/services/vault"
)

// openVault loads the vault key (TOOLBELT_VAULT_KEY or the data
// directory's vault.key) and refuses to start when it does not open what
// the database holds sealed: a server that started anyway would fail
// every person's upstream call and secret, one by one, for a reason only
// its operator can fix.
func (a *App) openVault(ctx context.Context) (err error) {
	if a.Vault, err = vault.Load(a.Config.VaultKey, a.Config.DataDir); err != nil {
		return err
	}
	return a.Vault.Check(ctx, a.Store)
}

// RotateVault seals every sealed value of the database (people's
// connected accounts and stored secrets, upstreams' client secrets)
// anew under the first key of cfg.VaultKey, in one transaction, and
// reports how many to out: "toolbelt vault rotate" with
// TOOLBELT_VAULT_KEY="new,old". After it the old key can be dropped.
func RotateVault(ctx context.Context, cfg Config, out io.Writer) error {
	if cfg.VaultKey == "" {
		return fmt.Errorf("set TOOLBELT_VAULT_KEY to the new key then the old one, \"new,old\" (with a key file: the old key is the content of %s; make a new one with: openssl rand -hex 32)",
			filepath.Join(cfg.DataDir, vault.KeyFile))
	}
	v, err := vault.Load(cfg.VaultKey, cfg.DataDir)
	if err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		if _, err := os.Stat(sqlitePath(cfg)); err != nil {
			return fmt.Errorf("no database to rotate at %s (set --data-dir or TOOLBELT_DATABASE_URL): %w", sqlitePath(cfg), err)
		}
	}
	store, err := openDatabase(ctx, cfg)
	if err != nil {
		return err
	}
	defer store.Close()
	n, err := v.Rotate(ctx, store)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "sealed anew under the first key of TOOLBELT_VAULT_KEY: %d credentials, %d upstream client secrets, %d canary\n"+
		"every instance may now start with TOOLBELT_VAULT_KEY set to the new key alone.\n", n.Credentials, n.Upstreams, n.Settings)
	return err
}
