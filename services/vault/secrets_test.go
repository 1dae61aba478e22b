package vault

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"toolbelt/models"
)

// Personal secrets: names and values are checked, a value is stored
// sealed and replaced, listed without it, read only as its owner's, and
// deleted; set and delete are in the audit log by name only.
func TestPersonalSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := models.Open(ctx, filepath.Join(t.TempDir(), "toolbelt.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	v, _ := New(newKey(t))
	s := NewSecrets(store, v)
	alice := &models.Principal{Name: "alice", Role: "agent"}
	bob := &models.Principal{Name: "bob", Role: "agent"}
	for _, p := range []*models.Principal{alice, bob} {
		if err := store.DB().Create(p).Error; err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []struct{ name, value, says string }{
		{"github_token", "v", "upper-case letter"},
		{"1TOKEN", "v", "upper-case letter"},
		{"A" + strings.Repeat("B", 64), "v", "upper-case letter"},
		{"TOKEN", "", "is empty"},
		{"TOKEN", strings.Repeat("x", MaxSecretBytes+1), "at most 8192"},
		{"TOKEN", "a\r\nX-Injected: 1", "line break"},
	} {
		if _, err := s.Put(ctx, alice, bad.name, bad.value); !errors.Is(err, models.ErrInvalid) || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("Put(%.20q, %.20q) = %v, want ErrInvalid saying %q", bad.name, bad.value, err, bad.says)
		}
	}
	const value = "alice-first-value-0123456789"
	first, err := s.Put(ctx, alice, "TOKEN", value)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.Put(ctx, alice, "TOKEN", "alice-second-value-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	// Replaced, it keeps when it was first stored.
	if !second.CreatedAt.Equal(first.CreatedAt) || second.UpdatedAt.Before(first.UpdatedAt) {
		t.Errorf("replaced: created %v then %v, updated %v then %v", first.CreatedAt, second.CreatedAt, first.UpdatedAt, second.UpdatedAt)
	}
	if got, err := s.PersonalSecret(ctx, alice.ID, "TOKEN"); err != nil || got != "alice-second-value-0123456789" {
		t.Errorf("alice's TOKEN = %q, %v", got, err)
	}
	if _, err := s.PersonalSecret(ctx, bob.ID, "TOKEN"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("bob's TOKEN: %v, want ErrNotFound", err)
	}
	list, err := s.List(ctx, alice.ID)
	if err != nil || len(list) != 1 || list[0].Name != "TOKEN" || list[0].UpdatedAt.IsZero() {
		t.Errorf("alice's list = %+v, %v", list, err)
	}
	if err := s.Delete(ctx, bob, "TOKEN"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("bob deleting a secret he has not: %v", err)
	}
	if err := s.Delete(ctx, alice, "TOKEN"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PersonalSecret(ctx, alice.ID, "TOKEN"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
	var entries []models.AuditEntry
	store.DB().Order("id").Find(&entries)
	var actions []string
	for _, e := range entries {
		actions = append(actions, e.Action+" "+e.Target+" "+e.Detail)
		if strings.Contains(e.Detail+e.Target, "value-0123456789") {
			t.Errorf("the audit log holds a value: %+v", e)
		}
	}
	want := []string{"secret.set secret:TOKEN stored, of alice (1)", "secret.set secret:TOKEN replaced, of alice (1)", "secret.delete secret:TOKEN of alice (1)"}
	if strings.Join(actions, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit log:\n%s\nwant:\n%s", strings.Join(actions, "\n"), strings.Join(want, "\n"))
	}
}
