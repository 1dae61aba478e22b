package access

import (
	"context"
	"slices"
	"strings"
	"testing"

	"toolbelt/models"
	"toolbelt/models/modelstest"
)

// A principal disabled or deleted loses its credentials at once, in the
// change's transaction: OnGone gets the rows (to revoke upstream), the
// audit entry names them (never what they held), and another principal's
// stay. Enabling gives nothing back.
func TestDisabledOrDeletedPrincipalLosesItsCredentials(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, _ := modelstest.Store(t)
	authz, err := OpenAuthz(ctx, AuthzDeps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	var gone [][]models.Credential
	accounts := NewAccounts(AccountsDeps{Store: store, Authz: authz, Log: quiet,
		OnGone: []func(context.Context, []models.Credential){func(_ context.Context, cs []models.Credential) { gone = append(gone, cs) }}})
	ids := map[string]uint{}
	for _, name := range []string{"alice", "bob"} {
		p, err := accounts.CreatePrincipal(ctx, NewPrincipal{Name: name, Role: RoleAgent}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = p.ID
		for _, c := range []models.Credential{
			{PrincipalID: p.ID, Kind: models.CredentialOAuth, Name: "github", Sealed: []byte("sealed-token-of-" + name)},
			{PrincipalID: p.ID, Kind: models.CredentialSecret, Name: "JIRA_TOKEN", Sealed: []byte("sealed-secret-of-" + name)},
		} {
			if err := store.PutCredential(ctx, &c); err != nil {
				t.Fatal(err)
			}
		}
	}
	names := func(cs []models.Credential) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Kind+"/"+c.Name)
		}
		return out
	}
	if _, err := accounts.SetDisabled(ctx, ids["alice"], true, nil); err != nil {
		t.Fatal(err)
	}
	if left, _ := store.CredentialsOf(ctx, ids["alice"], ""); len(left) != 0 {
		t.Errorf("alice disabled still has %v", names(left))
	}
	if left, _ := store.CredentialsOf(ctx, ids["bob"], ""); !slices.Equal(names(left), []string{"oauth/github", "secret/JIRA_TOKEN"}) {
		t.Errorf("bob's credentials after alice was disabled: %v", names(left))
	}
	if len(gone) != 1 || !slices.Equal(names(gone[0]), []string{"oauth/github", "secret/JIRA_TOKEN"}) || string(gone[0][0].Sealed) != "sealed-token-of-alice" {
		t.Errorf("OnGone got %v", gone)
	}
	if _, err := accounts.SetDisabled(ctx, ids["alice"], false, nil); err != nil {
		t.Fatal(err)
	}
	if err := accounts.DeletePrincipal(ctx, ids["bob"], nil); err != nil {
		t.Fatal(err)
	}
	if left, _ := store.CredentialsOf(ctx, ids["bob"], ""); len(left) != 0 {
		t.Errorf("bob deleted still has %v", names(left))
	}
	if len(gone) != 2 || gone[1][0].PrincipalID != ids["bob"] {
		t.Errorf("OnGone after the delete: %v", gone)
	}
	var entries []models.AuditEntry
	store.DB().Where("action IN ?", []string{models.AuditPrincipalDisable, models.AuditPrincipalDelete}).Order("id").Find(&entries)
	if len(entries) != 2 {
		t.Fatalf("audit entries: %+v", entries)
	}
	for _, e := range entries {
		if !strings.Contains(e.Detail, "credentials deleted: oauth github, secret JIRA_TOKEN") || strings.Contains(e.Detail, "sealed") {
			t.Errorf("audit detail: %q", e.Detail)
		}
	}
}
