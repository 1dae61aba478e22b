package access

import (
	"context"
	"fmt"
	"slices"

	"toolbelt/models"
)

// CreateExternal creates the principal of a person an external OpenID
// provider vouches for, linked to their identity there, with no API key:
// the person signs in through the provider. It is audited as any
// principal's creation. A name in use is ErrConflict naming it (the
// caller picks another); an identity linked meanwhile is
// models.ErrIdentityTaken.
func (a *Accounts) CreateExternal(ctx context.Context, name, role string, id *models.Identity) (*models.Principal, error) {
	var ps models.Problems
	checkPrincipal(&ps, name, role)
	if len(ps) > 0 {
		return nil, &models.ValidationError{What: "principal", Problems: ps}
	}
	p := &models.Principal{Name: name, Role: role}
	err := a.store.Audited(ctx, models.AuditPrincipalCreate, func(tx *models.Store) (string, string, error) {
		if err := tx.CreateIdentityPrincipal(ctx, p, id); err != nil {
			return "", "", err
		}
		return principalTarget(p.ID), fmt.Sprintf("%s, role %s, signed in through %s as %s", p.Name, p.Role, id.Issuer, id.Subject), nil
	})
	if err != nil {
		return nil, err
	}
	a.log.InfoContext(ctx, "principal created at first sign-in", "principal", p.Name, "role", p.Role, "issuer", id.Issuer)
	return p, nil
}

// SetRole changes a principal's role, saying why in the audit log (for a
// person, their groups at the provider changed). Authentications cached
// with the old role are dropped here and on the other instances. The
// last admin with a working key cannot be demoted.
func (a *Accounts) SetRole(ctx context.Context, id uint, role, why string) (*models.Principal, error) {
	if !slices.Contains(Roles, role) {
		return nil, models.ErrInvalid.Errorf("%q is not a role; use admin, reviewer or agent", role)
	}
	var from string
	var p *models.Principal
	err := a.store.Audited(ctx, models.AuditPrincipalRole, func(tx *models.Store) (string, string, error) {
		var err error
		p, err = tx.SetPrincipalRole(ctx, id, role, func(old *models.Principal, otherAdminKeys int64) error {
			from = old.Role
			if old.Role == RoleAdmin && role != RoleAdmin && old.DisabledAt == nil && otherAdminKeys == 0 {
				return models.ErrConflict.Errorf("%s is the last admin with a working key; create or enable another admin first", old.Name)
			}
			return nil
		})
		if err != nil {
			return "", "", err
		}
		return principalTarget(p.ID), fmt.Sprintf("%s, role %s → %s: %s", p.Name, from, role, why), nil
	})
	if err != nil {
		return nil, err
	}
	a.keysChanged(ctx)
	a.log.InfoContext(ctx, "principal role changed", "principal", p.Name, "from", from, "to", role, "why", why)
	return p, nil
}

// Generation counts the times cached authentications were dropped
// (ForgetKeys: a key revoked, a principal disabled, deleted or given
// another role, here or on another instance). A cache of other
// credentials (verified tokens) keeps the generation an entry was made
// in and drops it once the generation moved on, so what stops a key
// stops a token as soon.
func (a *Accounts) Generation() uint64 {
	a.keysMu.Lock()
	defer a.keysMu.Unlock()
	return a.forgotten
}
