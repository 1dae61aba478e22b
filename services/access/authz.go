package access

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"
	"github.com/casbin/casbin/v2/persist"

	"toolbelt/models"
)

// Roles a principal can hold.
const (
	RoleAdmin    = "admin"
	RoleReviewer = "reviewer"
	RoleAgent    = "agent"
)

// Roles lists every role.
var Roles = []string{RoleAdmin, RoleReviewer, RoleAgent}

// casbinModel allows a subject an object and action when a policy says so.
// Endpoint policies use "role:<role>" subjects, route patterns as objects
// (keyMatch, so "/api/v1/*" covers a subtree) and HTTP methods as actions;
// grants use "principal:<id>" subjects, "category:<c>" or "tool:<name>"
// objects and the action "use".
const casbinModel = `
[request_definition]
r = sub, obj, act

[policy_definition]
p = sub, obj, act

[policy_effect]
e = some(where (p.eft == allow))

[matchers]
m = r.sub == p.sub && keyMatch(r.obj, p.obj) && (p.act == "*" || r.act == p.act)
`

// Route is one endpoint a role may use: a Gin route pattern and a method.
type Route struct {
	Method string
	Path   string
}

// Authz is Casbin holding both endpoint policies per role and the
// categories and tools each agent may use, stored in the application
// database.
type Authz struct {
	e *casbin.SyncedEnforcer
	// decisions caches Enforce answers by request; every policy change
	// clears it, so a cached answer is never stale.
	decisions sync.Map
}

// enforce is Enforce through the decision cache.
func (a *Authz) enforce(sub, obj, act string) (bool, error) {
	key := sub + "\x00" + obj + "\x00" + act
	if v, ok := a.decisions.Load(key); ok {
		return v.(bool), nil
	}
	ok, err := a.e.Enforce(sub, obj, act)
	if err != nil {
		return false, err
	}
	a.decisions.Store(key, ok)
	return ok, nil
}

// AuthzDeps is what the enforcer needs.
type AuthzDeps struct {
	Store *models.Store
	// Roles are the endpoint policies of each role (the route table's),
	// replacing the stored ones, so a new release's route table takes
	// effect at start while grants persist.
	Roles map[string][]Route
	// Scopes are the endpoints each OAuth scope opens (the route
	// table's), seeded as "scope:<s>" policies the same way.
	Scopes map[string][]Route
	// Watcher, when set, makes the policy changes of other instances take
	// effect here: it tells them of every change this enforcer makes, and
	// reloads the policies (and drops the cached decisions) when one of
	// them changes something. Nil: this instance alone changes its
	// policies.
	Watcher persist.Watcher
}

// OpenAuthz loads the policies from the store's database.
func OpenAuthz(ctx context.Context, d AuthzDeps) (*Authz, error) {
	m, err := model.NewModelFromString(casbinModel)
	if err != nil {
		return nil, fmt.Errorf("load casbin model: %w", err)
	}
	e, err := casbin.NewSyncedEnforcer(m, models.NewCasbinAdapter(ctx, d.Store))
	if err != nil {
		return nil, fmt.Errorf("load casbin policies: %w", err)
	}
	a := &Authz{e: e}
	seed := func(subject string, routes []Route) error {
		rules := make([][]string, 0, len(routes))
		for _, r := range routes {
			rules = append(rules, []string{subject, r.Path, r.Method})
		}
		if err := a.replace(subject, rules); err != nil {
			return fmt.Errorf("seed endpoint policies for %s: %w", subject, err)
		}
		return nil
	}
	for _, role := range Roles {
		if err := seed("role:"+role, d.Roles[role]); err != nil {
			return nil, err
		}
	}
	for _, scope := range Scopes {
		if err := seed("scope:"+scope, d.Scopes[scope]); err != nil {
			return nil, err
		}
	}
	if d.Watcher != nil {
		if err := a.watch(d.Watcher); err != nil {
			return nil, fmt.Errorf("watch casbin policies: %w", err)
		}
	}
	return a, nil
}

// watch connects the enforcer to w (see AuthzDeps.Watcher).
func (a *Authz) watch(w persist.Watcher) error {
	if err := a.e.SetWatcher(w); err != nil {
		return err
	}
	// SetWatcher's own callback reloads without the enforcer's lock.
	return w.SetUpdateCallback(func(string) {
		defer a.decisions.Clear()
		_ = a.e.LoadPolicy() // on failure the policies stay as they were
	})
}

// replace swaps every policy of subject for rules in one transaction.
func (a *Authz) replace(subject string, rules [][]string) error {
	current, err := a.e.GetFilteredPolicy(0, subject)
	if err != nil {
		return err
	}
	if samePolicies(current, rules) {
		return nil
	}
	defer a.decisions.Clear()
	if len(rules) == 0 {
		_, err := a.e.RemoveFilteredPolicy(0, subject)
		return err
	}
	if len(current) == 0 {
		// UpdateFilteredPolicies replacing nothing stores the rules but
		// reports no change, so its watcher never tells the other
		// instances: the first grants of a principal are added.
		_, err = a.e.AddPolicies(rules)
		return err
	}
	_, err = a.e.UpdateFilteredPolicies(rules, 0, subject)
	return err
}

func samePolicies(a, b [][]string) bool {
	key := func(rs [][]string) []string {
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = strings.Join(r, "\x00")
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}

// CanAccess reports whether role may call method on the route pattern.
func (a *Authz) CanAccess(role, route, method string) (bool, error) {
	return a.enforce("role:"+role, route, method)
}

// CanAccessScoped reports whether a token holding scopes, of a principal
// of role, may call method on the route pattern: its role must allow it,
// and one of its scopes too.
func (a *Authz) CanAccessScoped(role string, scopes []string, route, method string) (bool, error) {
	if ok, err := a.CanAccess(role, route, method); !ok || err != nil {
		return false, err
	}
	return a.ScopesAllow(scopes, route, method)
}

// ScopesAllow reports whether one of a token's scopes opens method on the
// route pattern (its role is CanAccess's to say).
func (a *Authz) ScopesAllow(scopes []string, route, method string) (bool, error) {
	for _, s := range scopes {
		if ok, err := a.enforce("scope:"+s, route, method); ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// Grants are the categories and tools an agent may use.
type Grants struct {
	Categories []string `json:"categories"`
	Tools      []string `json:"tools"`
}

func principalSubject(id uint) string { return "principal:" + strconv.FormatUint(uint64(id), 10) }

// SetGrants replaces a principal's grants atomically.
func (a *Authz) SetGrants(id uint, g Grants) error {
	sub := principalSubject(id)
	rules := make([][]string, 0, len(g.Categories)+len(g.Tools))
	for _, c := range g.Categories {
		rules = append(rules, []string{sub, "category:" + c, "use"})
	}
	for _, t := range g.Tools {
		rules = append(rules, []string{sub, "tool:" + t, "use"})
	}
	if err := a.replace(sub, rules); err != nil {
		return fmt.Errorf("store grants of principal %d: %w", id, err)
	}
	return nil
}

// Grants returns a principal's grants, sorted.
func (a *Authz) Grants(id uint) (Grants, error) {
	rules, err := a.e.GetFilteredPolicy(0, principalSubject(id))
	if err != nil {
		return Grants{}, fmt.Errorf("load grants of principal %d: %w", id, err)
	}
	g := Grants{Categories: []string{}, Tools: []string{}}
	for _, r := range rules {
		if c, ok := strings.CutPrefix(r[1], "category:"); ok {
			g.Categories = append(g.Categories, c)
		} else if t, ok := strings.CutPrefix(r[1], "tool:"); ok {
			g.Tools = append(g.Tools, t)
		}
	}
	slices.Sort(g.Categories)
	slices.Sort(g.Tools)
	return g, nil
}

// MayUse reports whether the principal was granted the tool, by name or by
// its category.
func (a *Authz) MayUse(id uint, tool, category string) (bool, error) {
	sub := principalSubject(id)
	if ok, err := a.enforce(sub, "tool:"+tool, "use"); ok || err != nil {
		return ok, err
	}
	return a.enforce(sub, "category:"+category, "use")
}
