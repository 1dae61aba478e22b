package identity

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/access"
)

var quiet = slog.New(slog.DiscardHandler)

const issuer = "https://idp.example.test"

var roles = RoleMap{Admin: []string{"tb-admins"}, Reviewer: []string{"tb-reviewers"}, Agent: []string{"tb-agents", "bots"}}

// newPeople is People over a fresh database (the backend
// TOOLBELT_TEST_DATABASE chooses) with the bootstrap admin.
func newPeople(t *testing.T) (*People, *access.Accounts, *models.Store) {
	t.Helper()
	store, _ := modelstest.Store(t)
	authz, err := access.OpenAuthz(t.Context(), access.AuthzDeps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	acc := access.NewAccounts(access.AccountsDeps{Store: store, Authz: authz, Log: quiet})
	if _, err := acc.Bootstrap(t.Context(), "operator-key-0123456789-abcdef"); err != nil {
		t.Fatal(err)
	}
	return NewPeople(PeopleDeps{Store: store, Accounts: acc, Roles: roles, Log: quiet}), acc, store
}

func ada(groups ...string) Person {
	return Person{Issuer: issuer, Subject: "0f3e-ada", Username: "ada@corp.example", Email: "ada@corp.example", Name: "Ada L", Groups: groups}
}

func audit(t *testing.T, store *models.Store, action string) []models.AuditEntry {
	t.Helper()
	es, _, err := store.AuditEntries(t.Context(), models.AuditFilter{Action: action, Sort: "time"})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func count(t *testing.T, store *models.Store) int64 {
	t.Helper()
	n, err := store.CountPrincipals(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPeopleJustInTime makes a principal at the first sign-in, with the
// role of the person's groups, no API key, an identity and an audit entry;
// the next sign-in finds the same principal.
func TestPeopleJustInTime(t *testing.T) {
	t.Parallel()
	people, _, store := newPeople(t)
	ctx := t.Context()
	p, err := people.Principal(ctx, ada("staff", "tb-agents", "tb-reviewers"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "ada" || p.Role != access.RoleReviewer {
		t.Errorf("principal %q role %s, want ada, reviewer (reviewer before agent)", p.Name, p.Role)
	}
	all, _ := store.Principals(ctx)
	for _, q := range all {
		if q.ID == p.ID && len(q.Keys) != 0 {
			t.Errorf("a person's principal got %d API keys", len(q.Keys))
		}
	}
	ids, _ := store.Identities(ctx, p.ID)
	if len(ids) != 1 || ids[0].Issuer != issuer || ids[0].Subject != "0f3e-ada" || ids[0].Email != "ada@corp.example" || len(ids[0].Groups) != 3 {
		t.Errorf("identities = %+v", ids)
	}
	es := audit(t, store, models.AuditPrincipalCreate)
	if last := es[len(es)-1]; last.Target != "principal:"+itoa(p.ID) || !strings.Contains(last.Detail, "signed in through "+issuer) {
		t.Errorf("audit entry = %+v", last)
	}
	again, err := people.Principal(ctx, ada("tb-reviewers"))
	if err != nil || again.ID != p.ID {
		t.Errorf("second sign-in: %v, %v", again, err)
	}
	if n := count(t, store); n != 2 {
		t.Errorf("%d principals, want admin and ada", n)
	}
}

// TestPeopleNoMappedGroup refuses a person in none of the mapped groups
// and creates nothing.
func TestPeopleNoMappedGroup(t *testing.T) {
	t.Parallel()
	people, _, store := newPeople(t)
	for _, groups := range [][]string{nil, {"staff", "TB-ADMINS"}} {
		_, err := people.Principal(t.Context(), ada(groups...))
		if !errors.Is(err, models.ErrForbidden) || !strings.Contains(err.Error(), "none of the groups") {
			t.Errorf("groups %v: %v, want ErrForbidden naming the groups", groups, err)
		}
	}
	if n := count(t, store); n != 1 {
		t.Errorf("%d principals, want only the admin", n)
	}
	if es := audit(t, store, models.AuditPrincipalCreate); len(es) != 0 {
		t.Errorf("%d principal.create entries, want none", len(es))
	}
}

// TestPeopleRoleFollowsGroups changes the role (audited) when the groups
// change at the provider, and refuses without changing it when no mapped
// group is left.
func TestPeopleRoleFollowsGroups(t *testing.T) {
	t.Parallel()
	people, _, store := newPeople(t)
	ctx := t.Context()
	p, err := people.Principal(ctx, ada("bots"))
	if err != nil || p.Role != access.RoleAgent {
		t.Fatalf("first sign-in: %v, %v", p, err)
	}
	p, err = people.Principal(ctx, ada("bots", "tb-admins"))
	if err != nil || p.Role != access.RoleAdmin {
		t.Fatalf("promoted: %v, %v", p, err)
	}
	if es := audit(t, store, models.AuditPrincipalRole); len(es) != 1 || !strings.Contains(es[0].Detail, "agent → admin") {
		t.Errorf("principal.role entries = %+v", es)
	}
	if _, err := people.Principal(ctx, ada("staff")); !errors.Is(err, models.ErrForbidden) {
		t.Errorf("out of every group: %v, want ErrForbidden", err)
	}
	if q, _ := store.PrincipalByID(ctx, p.ID); q.Role != access.RoleAdmin {
		t.Errorf("refused sign-in changed the role to %s", q.Role)
	}
	p, err = people.Principal(ctx, ada("tb-reviewers"))
	if err != nil || p.Role != access.RoleReviewer {
		t.Errorf("demoted: %v, %v", p, err)
	}
}

// TestPeopleDisabledStaysOut refuses a disabled principal's person and
// changes nothing, though the provider still vouches for them.
func TestPeopleDisabledStaysOut(t *testing.T) {
	t.Parallel()
	people, acc, store := newPeople(t)
	ctx := t.Context()
	p, err := people.Principal(ctx, ada("bots"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acc.SetDisabled(ctx, p.ID, true, nil); err != nil {
		t.Fatal(err)
	}
	changed := ada("tb-admins")
	changed.Email = "new@corp.example"
	if _, err := people.Principal(ctx, changed); !errors.Is(err, models.ErrUnauthorized) || !strings.Contains(err.Error(), "disabled") {
		t.Errorf("disabled: %v, want ErrUnauthorized saying disabled", err)
	}
	q, _ := store.PrincipalByID(ctx, p.ID)
	ids, _ := store.Identities(ctx, p.ID)
	if q.Role != access.RoleAgent || ids[0].Email != "ada@corp.example" {
		t.Errorf("a disabled person's sign-in changed role %s, email %s", q.Role, ids[0].Email)
	}
	if n := count(t, store); n != 2 {
		t.Errorf("%d principals: a disabled person got another", n)
	}
}

// TestPeopleNeverTakesAnExistingPrincipal gives a person whose username is
// an existing principal's name a principal of their own: an IdP user named
// "admin" does not become the bootstrap admin.
func TestPeopleNeverTakesAnExistingPrincipal(t *testing.T) {
	t.Parallel()
	people, _, store := newPeople(t)
	ctx := t.Context()
	mallory := Person{Issuer: issuer, Subject: "m-1", Username: "admin", Groups: []string{"bots"}}
	p, err := people.Principal(ctx, mallory)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "admin-2" || p.Role != access.RoleAgent {
		t.Errorf("principal %q role %s, want admin-2, agent", p.Name, p.Role)
	}
	admin, _ := store.PrincipalByName(ctx, "admin")
	if ids, _ := store.Identities(ctx, admin.ID); len(ids) != 0 {
		t.Errorf("the bootstrap admin got linked to %+v", ids)
	}
	// Same subject at another issuer is another person.
	other := mallory
	other.Issuer = "https://other.example.test"
	q, err := people.Principal(ctx, other)
	if err != nil || q.ID == p.ID || q.Name != "admin-3" {
		t.Errorf("other issuer: %v, %v", q, err)
	}
}

// TestPeopleDeletedComesBackNew gives a person whose principal was deleted
// a new principal at their next sign-in (disabling, not deleting, keeps
// someone out).
func TestPeopleDeletedComesBackNew(t *testing.T) {
	t.Parallel()
	people, acc, _ := newPeople(t)
	ctx := t.Context()
	p, err := people.Principal(ctx, ada("bots"))
	if err != nil {
		t.Fatal(err)
	}
	if err := acc.DeletePrincipal(ctx, p.ID, nil); err != nil {
		t.Fatal(err)
	}
	q, err := people.Principal(ctx, ada("bots"))
	if err != nil || q.ID == p.ID {
		t.Errorf("after delete: %v, %v", q, err)
	}
}

// TestPeopleConcurrentFirstSignIn makes one principal for a person signing
// in twice at once.
func TestPeopleConcurrentFirstSignIn(t *testing.T) {
	t.Parallel()
	people, _, store := newPeople(t)
	errs := make(chan error, 4)
	ids := make(chan uint, 4)
	for range 4 {
		go func() {
			p, err := people.Principal(context.WithoutCancel(t.Context()), ada("bots"))
			if err == nil {
				ids <- p.ID
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(ids)
	first := <-ids
	for id := range ids {
		if id != first {
			t.Errorf("principals %d and %d for one person", first, id)
		}
	}
	if n := count(t, store); n != 2 {
		t.Errorf("%d principals, want admin and ada", n)
	}
}

func TestPrincipalName(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		who  Person
		want string
	}{
		{Person{Username: "ada"}, "ada"},
		{Person{Username: "ada.lovelace@corp.example"}, "ada.lovelace"},
		{Person{Username: "Ada Lovelace!"}, "Ada-Lovelace-"},
		{Person{Username: "__x"}, "x"},
		{Person{Username: "@@", Email: "bo@corp.example"}, "bo"},
		{Person{Username: "Ångström"}, "ngstr-m"},
		{Person{Subject: "auth0|12345"}, "auth0-12345"},
		{Person{Username: strings.Repeat("a", 80)}, strings.Repeat("a", 56)},
		{Person{Username: "…"}, "person"},
	} {
		if got := principalName(c.who); got != c.want {
			t.Errorf("principalName(%+v) = %q, want %q", c.who, got, c.want)
		}
	}
}

func TestPersonFromClaims(t *testing.T) {
	t.Parallel()
	m := RoleMap{Claim: "roles"}
	p, err := m.PersonFromClaims(issuer, map[string]any{"sub": "s", "roles": []any{"a", 3, "b"}, "groups": []any{"x"}})
	if err != nil || strings.Join(p.Groups, ",") != "a,b" {
		t.Errorf("array claim: %+v, %v", p, err)
	}
	p, _ = m.PersonFromClaims(issuer, map[string]any{"sub": "s", "roles": "a b,c"})
	if strings.Join(p.Groups, ",") != "a,b,c" {
		t.Errorf("string claim: %v", p.Groups)
	}
	if _, err := m.PersonFromClaims(issuer, map[string]any{"roles": "a"}); !errors.Is(err, models.ErrUnauthorized) {
		t.Errorf("no sub: %v", err)
	}
}

func itoa(n uint) string { return strconv.FormatUint(uint64(n), 10) }
