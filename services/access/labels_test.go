package access

import (
	"context"
	"errors"
	"testing"

	"toolbelt/models"
)

// A principal's name and a key's label are shown in the console, the
// audit log and the server's logs: one holding a control or bidirectional
// formatting character could pass for another ("ci\u202Eyolped" shows as
// "cideploy"), so both are refused at their own pointer, and nothing is
// stored.
func TestNamesAndLabelsRefuseHiddenCharacters(t *testing.T) {
	ctx := context.Background()
	acc, store := newAccounts(t)
	owner, err := acc.CreatePrincipal(ctx, NewPrincipal{Name: "ci-bot", Role: RoleAgent, KeyLabel: "مفتاح النشر"}, nil)
	if err != nil {
		t.Fatalf("a label in Arabic: %v", err)
	}
	hidden := []rune{0x200F, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069, 0x200B, 0xFEFF}
	for r := rune(0); r < 0x20; r++ {
		hidden = append(hidden, r)
	}
	refusedAt := func(err error, pointer string) bool {
		var ve *models.ValidationError
		if !errors.As(err, &ve) {
			return false
		}
		for _, p := range ve.Problems {
			if p.Pointer == pointer {
				return true
			}
		}
		return false
	}
	for _, r := range hidden {
		h := string(r)
		if _, err := acc.CreatePrincipal(ctx, NewPrincipal{Name: "ci" + h + "bot", Role: RoleAgent}, nil); !refusedAt(err, "/name") {
			t.Errorf("principal name with %U: %v", r, err)
		}
		if _, err := acc.CreatePrincipal(ctx, NewPrincipal{Name: "deployer", Role: RoleAgent, KeyLabel: "ci" + h + "deploy"}, nil); !refusedAt(err, "/key_label") {
			t.Errorf("first key's label with %U: %v", r, err)
		}
		if _, err := acc.IssueKey(ctx, owner.ID, KeyOptions{Label: "ci" + h + "deploy"}, nil); !refusedAt(err, "/label") {
			t.Errorf("key label with %U: %v", r, err)
		}
	}
	ps, err := store.Principals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || len(ps[0].Keys) != 1 {
		t.Errorf("something refused was stored: %+v", ps)
	}
}
