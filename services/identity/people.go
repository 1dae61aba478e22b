// Package identity maps people an external OpenID provider vouches for to
// Toolbelt principals: People makes (just in time) and keeps up to date
// the principal of a person from their claims, and JWTVerifier accepts
// the provider's JWT access tokens at /mcp and /api/v1 as that principal.
// It speaks OpenID through go-oidc and knows nothing of HTTP requests.
package identity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"toolbelt/models"
	"toolbelt/services/access"
)

// DefaultRoleClaim is the claim whose values RoleMap matches when it
// names none.
const DefaultRoleClaim = "groups"

// RoleMap turns the values of one claim (usually the person's groups) into
// a role: the first role, in the order admin, reviewer, agent, one of whose
// groups the person is in. A person in none gets no principal.
type RoleMap struct {
	Claim    string // DefaultRoleClaim when empty
	Admin    []string
	Reviewer []string
	Agent    []string
}

// Role returns the role groups map to, "" when none does.
func (m RoleMap) Role(groups []string) string {
	for _, r := range []struct {
		role   string
		groups []string
	}{{access.RoleAdmin, m.Admin}, {access.RoleReviewer, m.Reviewer}, {access.RoleAgent, m.Agent}} {
		for _, g := range groups {
			if slices.Contains(r.groups, g) {
				return r.role
			}
		}
	}
	return ""
}

// claim is the claim m reads.
func (m RoleMap) claim() string {
	if m.Claim == "" {
		return DefaultRoleClaim
	}
	return m.Claim
}

// Person is what a verified ID token or access token says of someone.
type Person struct {
	Issuer   string
	Subject  string
	Username string // preferred_username
	Email    string
	Name     string
	Groups   []string // the values of the RoleMap's claim
}

// PersonFromClaims reads a person from verified claims. The role claim
// may be an array of strings or one string (space- or comma-separated).
// A token without a subject is ErrUnauthorized.
func (m RoleMap) PersonFromClaims(issuer string, claims map[string]any) (Person, error) {
	str := func(k string) string { s, _ := claims[k].(string); return s }
	p := Person{Issuer: issuer, Subject: str("sub"), Username: str("preferred_username"), Email: str("email"), Name: str("name")}
	if p.Subject == "" {
		return Person{}, models.ErrUnauthorized.Errorf("the token names no subject (sub)")
	}
	switch v := claims[m.claim()].(type) {
	case []any:
		for _, g := range v {
			if s, ok := g.(string); ok {
				p.Groups = append(p.Groups, s)
			}
		}
	case []string:
		p.Groups = append(p.Groups, v...)
	case string:
		p.Groups = strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' })
	}
	return p, nil
}

// People finds or makes the principal of a person.
type People struct {
	store    *models.Store
	accounts *access.Accounts
	roles    RoleMap
	log      *slog.Logger
	now      func() time.Time
}

// PeopleDeps is what People needs.
type PeopleDeps struct {
	Store    *models.Store
	Accounts *access.Accounts
	Roles    RoleMap
	Log      *slog.Logger
}

// NewPeople returns the people service.
func NewPeople(d PeopleDeps) *People {
	return &People{store: d.Store, accounts: d.Accounts, roles: d.Roles, log: d.Log, now: time.Now}
}

// Roles is the role mapping People applies.
func (pp *People) Roles() RoleMap { return pp.roles }

// touchEvery bounds how often a returning person's last sign-in is
// written when nothing else about them changed.
const touchEvery = time.Minute

// Principal returns the principal of a person, creating it at their first
// sign-in. The role follows the person's groups at every sign-in: a role
// that changed at the provider changes the principal's (audited); a person
// in none of the mapped groups is refused with models.ErrForbidden and
// nothing is created or changed (an existing principal keeps its role, so
// being put back in a group restores access as it was). A disabled
// principal is refused with models.ErrUnauthorized and nothing is
// changed: the provider vouching for the person does not undo an admin's
// decision.
func (pp *People) Principal(ctx context.Context, who Person) (*models.Principal, error) {
	role := pp.roles.Role(who.Groups)
	for attempt := 0; ; attempt++ {
		id, p, err := pp.store.IdentityBySubject(ctx, who.Issuer, who.Subject)
		switch {
		case err == nil:
			return pp.returning(ctx, who, role, id, p)
		case !errors.Is(err, models.ErrNotFound):
			return nil, err
		}
		if role == "" {
			return nil, pp.noRole(who)
		}
		p, err = pp.create(ctx, who, role)
		if errors.Is(err, models.ErrIdentityTaken) && attempt == 0 {
			continue // the same person signed in at once elsewhere: use theirs
		}
		return p, err
	}
}

// noRole is the refusal of a person in none of the mapped groups.
func (pp *People) noRole(who Person) error {
	return models.ErrForbidden.Errorf("%s is in none of the groups Toolbelt maps to a role (claim %q: %s); ask an admin of %s to add you to one",
		who.display(), pp.roles.claim(), quoteAll(who.Groups), who.Issuer)
}

// returning updates and returns the principal of a person seen before.
func (pp *People) returning(ctx context.Context, who Person, role string, id *models.Identity, p *models.Principal) (*models.Principal, error) {
	if p.DisabledAt != nil {
		return nil, models.ErrUnauthorized.Errorf("principal %q is disabled; ask an admin to enable it", p.Name)
	}
	if role == "" {
		return nil, pp.noRole(who)
	}
	if role != p.Role {
		why := fmt.Sprintf("groups at %s are now %s", who.Issuer, quoteAll(who.Groups))
		var err error
		if p, err = pp.accounts.SetRole(ctx, p.ID, role, why); err != nil {
			return nil, err
		}
	}
	seen := &models.Identity{ID: id.ID, Email: who.Email, Name: who.Name, Groups: who.Groups, LastSeenAt: pp.now().UTC()}
	if !seen.Same(id) || seen.LastSeenAt.Sub(id.LastSeenAt) >= touchEvery {
		if err := pp.store.TouchIdentity(ctx, seen); err != nil {
			pp.log.WarnContext(ctx, "record sign-in", "principal", p.Name, "err", err)
		}
	}
	return p, nil
}

// create makes the principal of a person at their first sign-in, under
// the first free name derived from who they are.
func (pp *People) create(ctx context.Context, who Person, role string) (*models.Principal, error) {
	base := principalName(who)
	for n := 1; ; n++ {
		name := base
		if n > 1 {
			name = base + "-" + strconv.Itoa(n)
		}
		id := &models.Identity{Issuer: who.Issuer, Subject: who.Subject, Email: who.Email, Name: who.Name,
			Groups: who.Groups, LastSeenAt: pp.now().UTC()}
		p, err := pp.accounts.CreateExternal(ctx, name, role, id)
		if n < maxNameTries && errors.Is(err, models.ErrConflict) && !errors.Is(err, models.ErrIdentityTaken) {
			continue
		}
		return p, err
	}
}

// maxNameTries bounds the suffixes tried for a name in use.
const maxNameTries = 50

// nameBase is the longest a derived name may be before a suffix.
const nameBase = 56

var notNameChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// principalName derives a principal name from a person: their username,
// else their email's local part, else their subject, reduced to what
// principal names allow (letters, digits, '.', '_', '-', starting with a
// letter or digit).
func principalName(who Person) string {
	for _, s := range []string{who.Username, who.Email, who.Subject} {
		if local, _, ok := strings.Cut(s, "@"); ok {
			s = local
		}
		s = notNameChars.ReplaceAllString(s, "-")
		s = strings.TrimLeft(s, "._-")
		if len(s) > nameBase {
			s = strings.TrimRight(s[:nameBase], "._-")
		}
		if s != "" {
			return s
		}
	}
	return "person"
}

// display names a person in a message.
func (who Person) display() string {
	for _, s := range []string{who.Username, who.Email} {
		if s != "" {
			return strconv.Quote(s)
		}
	}
	return "subject " + strconv.Quote(who.Subject)
}

func quoteAll(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
