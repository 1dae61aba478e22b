package selection

import (
	"context"
	"slices"
	"strings"

	"toolbelt/models"
	"toolbelt/services/access"
)

// CallableKey is what the pages Callable gives one caller depend on,
// besides their cursor, format and size: the catalog's index (a new one
// after every change the selector learns of, a cluster peer's included)
// and what the caller may see. Two equal keys (==) mean equal pages, so a
// page can be kept under its key: a change to the catalog or to the
// caller's grants makes a new key, and the old pages are never read again.
type CallableKey struct {
	catalog *index
	visible string
}

// SameCatalog reports whether k and o were read from the same index: when
// not, pages kept under the older one can go.
func (k CallableKey) SameCatalog(o CallableKey) bool { return k.catalog == o.catalog }

// CallableKey returns caller's key, the catalog brought up to date first
// as Callable does.
func (s *Selector) CallableKey(ctx context.Context, caller *models.Principal) (CallableKey, error) {
	if err := s.ensureFresh(ctx); err != nil {
		return CallableKey{}, err
	}
	k := CallableKey{catalog: s.catalog.snapshot.Load()}
	switch {
	case caller != nil && caller.Role == access.RoleReviewer:
		k.visible = "none"
	case caller == nil || caller.Role != access.RoleAgent:
		k.visible = "all"
	default:
		g, err := s.authz.Grants(caller.ID)
		if err != nil {
			return CallableKey{}, err
		}
		// As visibilityOf reads them: the sets, in any order.
		cats, tools := slices.Sorted(slices.Values(g.Categories)), slices.Sorted(slices.Values(g.Tools))
		k.visible = "agent\x00" + strings.Join(slices.Compact(cats), "\x01") + "\x00" + strings.Join(slices.Compact(tools), "\x01")
	}
	return k, nil
}
