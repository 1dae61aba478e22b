package app

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"toolbelt/internal/dbtest"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/vault"
)

// otherVaultKey is a second vault key (openssl rand -hex 32): the key a
// rotation moves to, or the wrong one.
const otherVaultKey = "d7b906919f69da75ef8f71964c8eafdec46e85d81c1ed460b309c6ae90b2fef4"

// startWith starts the service over dir with the vault key vaultKey
// ("" for the data directory's key file).
func startWith(t *testing.T, dir, vaultKey string) (*App, error) {
	t.Helper()
	cfg := testConfig(t, dir)
	cfg.VaultKey = vaultKey
	return New(context.Background(), cfg, Options{Stdout: io.Discard, LogOutput: io.Discard})
}

// storeSecret starts the service over dir with vaultKey, stores the
// secret TOKEN of a new principal alice, and stops.
func storeSecret(t *testing.T, dir, vaultKey, value string) {
	t.Helper()
	a, err := startWith(t, dir, vaultKey)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	created, err := a.Accounts.CreatePrincipal(ctx, access.NewPrincipal{Name: "alice", Role: access.RoleAgent}, nil)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := a.Store.PrincipalByID(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Secrets.Put(ctx, alice, "TOKEN", value); err != nil {
		t.Fatal(err)
	}
}

// wrongKeyRefused checks a start was refused for its vault key, saying
// what to do without showing any key.
func wrongKeyRefused(t *testing.T, what string, err error, says ...string) {
	t.Helper()
	if !errors.Is(err, vault.ErrWrongKey) {
		t.Fatalf("%s: started, or failed otherwise: %v", what, err)
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: the refusal does not say %q:\n%v", what, s, err)
		}
	}
	for _, k := range []string{testVaultKey, otherVaultKey} {
		if strings.Contains(err.Error(), k) {
			t.Errorf("%s: the refusal shows a key:\n%v", what, err)
		}
	}
}

// A start whose vault key does not open what the database holds sealed
// refuses, naming where the key came from and what to do: a wrong
// TOOLBELT_VAULT_KEY, the setting left unset (a key file made at this
// start), and that key file at the next start. The right key in a
// rotation list starts.
func TestWrongVaultKeyRefusesToStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	storeSecret(t, dir, testVaultKey, "alice-token-value")

	_, err := startWith(t, dir, otherVaultKey)
	wrongKeyRefused(t, "wrong TOOLBELT_VAULT_KEY", err, "TOOLBELT_VAULT_KEY", "toolbelt vault rotate", "docs/identity-vault.md")
	keyFile := filepath.Join(dir, "data", vault.KeyFile)
	_, err = startWith(t, dir, "")
	wrongKeyRefused(t, "key unset", err, "TOOLBELT_VAULT_KEY is unset", "made a new key file "+keyFile)
	_, err = startWith(t, dir, "")
	wrongKeyRefused(t, "key file", err, "the key file "+keyFile+" holds another key")

	a, err := startWith(t, dir, otherVaultKey+","+testVaultKey)
	if err != nil {
		t.Fatalf("new,old: %v", err)
	}
	defer a.Close()
	alice, _ := a.Store.PrincipalByName(context.Background(), "alice")
	if v, err := a.Secrets.PersonalSecret(context.Background(), alice.ID, "TOKEN"); err != nil || v != "alice-token-value" {
		t.Errorf("the secret under new,old: %q, %v", v, err)
	}
}

// Instances over one Postgres database with no TOOLBELT_VAULT_KEY each
// make a key file of their own: the second refuses to start rather than
// serve with a key that opens nothing the first sealed.
func TestSecondInstanceWithOwnKeyFileRefused(t *testing.T) {
	db := dbtest.Postgres(t)
	start := func() (*App, error) {
		cfg := testConfig(t, t.TempDir())
		cfg.DatabaseURL, cfg.AdminKey, cfg.VaultKey = db, testAdminKey, ""
		return New(context.Background(), cfg, Options{Stdout: io.Discard, LogOutput: io.Discard})
	}
	first, err := start()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	_, err = start()
	wrongKeyRefused(t, "second instance", err, "TOOLBELT_VAULT_KEY is unset", "another instance's", "Set TOOLBELT_VAULT_KEY to the key the other instances use")
}

// Rotation: values sealed under K1 are sealed anew under K2 with
// TOOLBELT_VAULT_KEY="K2,K1"; then K2 alone opens everything and K1
// alone is refused. A list missing the old key changes nothing.
func TestVaultRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	storeSecret(t, dir, testVaultKey, "alice-token-value")
	// An upstream's client secret, sealed as registration seals it.
	k1, _ := vault.Load(testVaultKey, "")
	up := &models.Upstream{Name: "issues", Transport: "http", URL: "https://issues.invalid/mcp", Category: "api"}
	var err error
	if up.AuthSecret, err = k1.Seal([]byte("client-secret-value"), vault.UpstreamClientData(up)...); err != nil {
		t.Fatal(err)
	}
	{
		a, err := startWith(t, dir, testVaultKey)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Store.DB().Create(up).Error; err != nil {
			t.Fatal(err)
		}
		_ = a.Close()
	}
	cfg := testConfig(t, dir)

	cfg.VaultKey = otherVaultKey // K2 alone: cannot open what K1 sealed
	if err := RotateVault(ctx, cfg, io.Discard); !errors.Is(err, vault.ErrWrongKey) {
		t.Fatalf("rotate without the old key: %v", err)
	}
	var out bytes.Buffer
	cfg.VaultKey = otherVaultKey + "," + testVaultKey
	if err := RotateVault(ctx, cfg, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "1 credentials, 1 upstream client secrets, 1 canary") {
		t.Errorf("the report: %s", out.String())
	}
	out.Reset()
	if err := RotateVault(ctx, cfg, &out); err != nil || !strings.Contains(out.String(), "0 credentials, 0 upstream client secrets, 0 canary") {
		t.Errorf("rotating again: %v %s", err, out.String())
	}

	_, err = startWith(t, dir, testVaultKey)
	wrongKeyRefused(t, "the old key alone after rotation", err)
	a, err := startWith(t, dir, otherVaultKey)
	if err != nil {
		t.Fatalf("the new key alone after rotation: %v", err)
	}
	defer a.Close()
	alice, _ := a.Store.PrincipalByName(ctx, "alice")
	if v, err := a.Secrets.PersonalSecret(ctx, alice.ID, "TOKEN"); err != nil || v != "alice-token-value" {
		t.Errorf("the secret after rotation: %q, %v", v, err)
	}
	var stored models.Upstream
	if err := a.Store.DB().Where("name = ?", "issues").First(&stored).Error; err != nil {
		t.Fatal(err)
	}
	if v, err := a.Vault.Open(stored.AuthSecret, vault.UpstreamClientData(&stored)...); err != nil || string(v) != "client-secret-value" {
		t.Errorf("the upstream's client secret after rotation: %q, %v", v, err)
	}
}

// A stolen database without the key: its file holds no secret in plain
// text, and a vault of another key opens none of its sealed values. With
// the key but a row rewritten (alice's sealed value copied into bob's
// row), the value does not open as bob's either.
func TestStolenDatabaseReadsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const value = "ghp_StolenDatabasePlainValue0123456789ab"
	dir := t.TempDir()
	storeSecret(t, dir, testVaultKey, value)

	data := filepath.Join(dir, "data")
	entries, err := os.ReadDir(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join(data, e.Name())); err == nil && bytes.Contains(b, []byte(value)) {
			t.Errorf("%s holds the plain secret", e.Name())
		}
	}
	stolen := filepath.Join(t.TempDir(), "stolen.db")
	raw, err := os.ReadFile(filepath.Join(data, "toolbelt.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stolen, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := models.Open(ctx, stolen)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	thief, _ := vault.Load(otherVaultKey, "")
	var creds []models.Credential
	if err := store.DB().Find(&creds).Error; err != nil || len(creds) != 1 {
		t.Fatalf("credentials in the copy: %d, %v", len(creds), err)
	}
	if _, err := thief.OpenCredential(&creds[0]); !errors.Is(err, vault.ErrOpen) {
		t.Errorf("another key opened the stolen credential: %v", err)
	}
	if _, err := vault.NewSecrets(store, thief).PersonalSecret(ctx, creds[0].PrincipalID, "TOKEN"); !errors.Is(err, vault.ErrOpen) {
		t.Errorf("another key read the secret: %v", err)
	}
	// With the right key, alice's sealed bytes in bob's row open nowhere.
	owner, _ := vault.Load(testVaultKey, "")
	moved := models.Credential{PrincipalID: creds[0].PrincipalID + 100, Kind: models.CredentialSecret, Name: "TOKEN", Sealed: creds[0].Sealed}
	if err := store.DB().Create(&moved).Error; err != nil {
		t.Fatal(err)
	}
	if _, err := vault.NewSecrets(store, owner).PersonalSecret(ctx, moved.PrincipalID, "TOKEN"); !errors.Is(err, vault.ErrOpen) {
		t.Errorf("alice's sealed value opened as another's: %v", err)
	}
}
