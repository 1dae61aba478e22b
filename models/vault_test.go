package models_test

import (
	"context"
	"testing"

	"toolbelt/models"
	"toolbelt/models/modelstest"
)

// A rotation that meets a token refreshed by another instance after it
// read the row (Postgres: another transaction) seals the new token anew,
// not the old one over it: the refresh is not lost.
func TestResealKeepsARefreshThatLandsFirst(t *testing.T) {
	ctx := context.Background()
	store := modelstest.Postgres(t)
	c := &models.Credential{PrincipalID: 7, Kind: models.CredentialOAuth, Name: "issues", Sealed: []byte("token-1")}
	if err := store.PutCredential(ctx, c); err != nil {
		t.Fatal(err)
	}
	var seen []string
	n, err := store.Reseal(ctx, models.Reseal{
		Credential: func(c *models.Credential) ([]byte, error) {
			seen = append(seen, string(c.Sealed))
			if len(seen) == 1 { // another instance refreshes, and commits
				err := store.DB().Model(&models.Credential{}).Where("id = ?", c.ID).
					Updates(map[string]any{"sealed": []byte("token-2"), "version": c.Version + 1}).Error
				if err != nil {
					t.Fatal(err)
				}
			}
			return append([]byte("resealed-"), c.Sealed...), nil
		},
		Upstream:   func(*models.Upstream) ([]byte, error) { return nil, nil },
		SettingKey: "absent",
		Setting:    func(string) (string, error) { return "", nil },
	})
	if err != nil || n.Credentials != 1 {
		t.Fatalf("reseal: %+v, %v", n, err)
	}
	got, err := store.CredentialOf(ctx, 7, models.CredentialOAuth, "issues")
	if err != nil || string(got.Sealed) != "resealed-token-2" || len(seen) != 2 {
		t.Fatalf("stored %q after sealing %q", got.Sealed, seen)
	}
}
