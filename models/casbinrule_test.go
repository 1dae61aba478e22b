package models

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
)

// testCasbinModel is the authorization model of access.Authz, with role
// links so that g lines are stored too.
const testCasbinModel = `
[request_definition]
r = sub, obj, act
[policy_definition]
p = sub, obj, act
[role_definition]
g = _, _
[policy_effect]
e = some(where (p.eft == allow))
[matchers]
m = (r.sub == p.sub || g(r.sub, p.sub)) && keyMatch(r.obj, p.obj) && (p.act == "*" || r.act == p.act)
`

// loadEnforcer loads the policies stored in the database open opens, as
// access.OpenAuthz does.
func loadEnforcer(t *testing.T, open func(t *testing.T) *Store) (*casbin.SyncedEnforcer, *Store) {
	t.Helper()
	store := open(t)
	m, err := model.NewModelFromString(testCasbinModel)
	if err != nil {
		t.Fatal(err)
	}
	e, err := casbin.NewSyncedEnforcer(m, NewCasbinAdapter(context.Background(), store))
	if err != nil {
		t.Fatal(err)
	}
	return e, store
}

// lines are every policy and role link of e, "p,a,b,c" each, sorted.
func lines(t *testing.T, e *casbin.SyncedEnforcer) []string {
	t.Helper()
	p, err := e.GetPolicy()
	if err != nil {
		t.Fatal(err)
	}
	g, err := e.GetGroupingPolicy()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range p {
		out = append(out, "p,"+strings.Join(r, ","))
	}
	for _, r := range g {
		out = append(out, "g,"+strings.Join(r, ","))
	}
	slices.Sort(out)
	return out
}

// TestCasbinAdapterRoundTrip changes the policies through Casbin's
// enforcer, each change stored as it is made, and loads them again from the
// database file: what was loaded is what the enforcer held.
func TestCasbinAdapterRoundTrip(t *testing.T) {
	seed := func(e *casbin.SyncedEnforcer) error {
		if _, err := e.AddPolicies([][]string{
			{"role:admin", "/api/v1/*", "*"}, {"role:agent", "/api/v1/tools", "GET"},
			{"principal:1", "tool:file_read", "use"}, {"principal:1", "category:shell", "use"}, {"principal:2", "tool:file_read", "use"},
		}); err != nil {
			return err
		}
		_, err := e.AddGroupingPolicy("principal:3", "role:agent")
		return err
	}
	seeded := []string{"g,principal:3,role:agent",
		"p,principal:1,category:shell,use", "p,principal:1,tool:file_read,use", "p,principal:2,tool:file_read,use",
		"p,role:admin,/api/v1/*,*", "p,role:agent,/api/v1/tools,GET"}
	without := func(drop ...string) []string {
		return slices.DeleteFunc(slices.Clone(seeded), func(l string) bool { return slices.Contains(drop, l) })
	}
	type enforcer = casbin.SyncedEnforcer
	for _, tc := range []struct {
		name   string
		change func(e *enforcer) (bool, error)
		want   []string
	}{
		{"seeded", func(e *enforcer) (bool, error) { return true, nil }, seeded},
		{"add one", func(e *enforcer) (bool, error) {
			return e.AddPolicy("principal:2", "category:api", "use")
		}, append(without(), "p,principal:2,category:api,use")},
		{"add one already there", func(e *enforcer) (bool, error) {
			return e.AddPolicy("principal:2", "tool:file_read", "use")
		}, seeded},
		{"add several", func(e *enforcer) (bool, error) {
			return e.AddPolicies([][]string{{"principal:4", "tool:a", "use"}, {"principal:4", "tool:b", "use"}})
		}, append(without(), "p,principal:4,tool:a,use", "p,principal:4,tool:b,use")},
		{"remove one", func(e *enforcer) (bool, error) {
			return e.RemovePolicy("principal:1", "tool:file_read", "use")
		}, without("p,principal:1,tool:file_read,use")},
		{"remove several", func(e *enforcer) (bool, error) {
			return e.RemovePolicies([][]string{{"principal:1", "tool:file_read", "use"}, {"principal:2", "tool:file_read", "use"}})
		}, without("p,principal:1,tool:file_read,use", "p,principal:2,tool:file_read,use")},
		{"remove by subject", func(e *enforcer) (bool, error) {
			return e.RemoveFilteredPolicy(0, "principal:1")
		}, without("p,principal:1,tool:file_read,use", "p,principal:1,category:shell,use")},
		{"remove by object, any subject", func(e *enforcer) (bool, error) {
			return e.RemoveFilteredPolicy(0, "", "tool:file_read")
		}, without("p,principal:1,tool:file_read,use", "p,principal:2,tool:file_read,use")},
		{"remove by object, from the second field", func(e *enforcer) (bool, error) {
			return e.RemoveFilteredPolicy(1, "category:shell")
		}, without("p,principal:1,category:shell,use")},
		{"remove a role link", func(e *enforcer) (bool, error) {
			return e.RemoveGroupingPolicy("principal:3", "role:agent")
		}, without("g,principal:3,role:agent")},
		{"update one", func(e *enforcer) (bool, error) {
			return e.UpdatePolicy([]string{"role:agent", "/api/v1/tools", "GET"}, []string{"role:agent", "/api/v1/tools/*", "GET"})
		}, append(without("p,role:agent,/api/v1/tools,GET"), "p,role:agent,/api/v1/tools/*,GET")},
		{"update several", func(e *enforcer) (bool, error) {
			return e.UpdatePolicies([][]string{{"principal:1", "tool:file_read", "use"}, {"principal:2", "tool:file_read", "use"}},
				[][]string{{"principal:1", "tool:file_write", "use"}, {"principal:2", "tool:file_list", "use"}})
		}, append(without("p,principal:1,tool:file_read,use", "p,principal:2,tool:file_read,use"),
			"p,principal:1,tool:file_write,use", "p,principal:2,tool:file_list,use")},
		{"replace a subject's rules (SetGrants)", func(e *enforcer) (bool, error) {
			return e.UpdateFilteredPolicies([][]string{{"principal:1", "category:api", "use"}, {"principal:1", "tool:file_read", "use"}}, 0, "principal:1")
		}, append(without("p,principal:1,category:shell,use"), "p,principal:1,category:api,use")},
		{"rules for a new subject", func(e *enforcer) (bool, error) {
			return e.UpdateFilteredPolicies([][]string{{"principal:9", "category:api", "use"}}, 0, "principal:9")
		}, append(without(), "p,principal:9,category:api,use")},
		{"save all", func(e *enforcer) (bool, error) {
			e.EnableAutoSave(false) // changes in memory only, until SavePolicy
			if _, err := e.RemovePolicy("role:admin", "/api/v1/*", "*"); err != nil {
				return false, err
			}
			if _, err := e.AddPolicy("principal:5", "tool:x", "use"); err != nil {
				return false, err
			}
			return true, e.SavePolicy()
		}, append(without("p,role:admin,/api/v1/*,*"), "p,principal:5,tool:x,use")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, open func(t *testing.T) *Store) {
				e, store := loadEnforcer(t, open)
				if err := seed(e); err != nil {
					t.Fatal(err)
				}
				if _, err := tc.change(e); err != nil {
					t.Fatal(err)
				}
				held := lines(t, e)
				if err := store.Close(); err != nil {
					t.Fatal(err)
				}
				loaded, _ := loadEnforcer(t, open)
				want := slices.Sorted(slices.Values(tc.want))
				if got := lines(t, loaded); !slices.Equal(got, want) || !slices.Equal(held, want) {
					t.Errorf("loaded %q\nheld   %q\nwant   %q", got, held, want)
				}
			})
		})
	}
}

// TestCasbinAdapterRefuses checks the changes the adapter stores nothing
// for: a filter that would match every rule, and a rule longer than the
// table's columns.
func TestCasbinAdapterRefuses(t *testing.T) {
	eachStore(t, func(t *testing.T, store *Store) {
		a := NewCasbinAdapter(context.Background(), store)
		if err := a.AddPolicy("p", "p", []string{"principal:1", "tool:a", "use"}); err != nil {
			t.Fatal(err)
		}
		for name, err := range map[string]error{
			"remove, no value":   a.RemoveFilteredPolicy("p", "p", 0, "", ""),
			"remove, past v5":    a.RemoveFilteredPolicy("p", "p", 5, "a", "b"),
			"update, no value":   func() error { _, err := a.UpdateFilteredPolicies("p", "p", nil, 1, ""); return err }(),
			"add seven values":   a.AddPolicy("p", "p", []string{"1", "2", "3", "4", "5", "6", "7"}),
			"update, odd counts": a.UpdatePolicies("p", "p", [][]string{{"a"}}, nil),
		} {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", name, err)
			}
		}
		var n int64
		if err := store.db.Model(&CasbinRule{}).Count(&n).Error; err != nil || n != 1 {
			t.Errorf("%d rules stored (%v), want the one added", n, err)
		}
	})
}

// gormAdapterSchema is the table and index casbin's gorm-adapter made in
// SQLite, as it made them.
var gormAdapterSchema = []string{
	"CREATE TABLE `casbin_rule` (`id` integer PRIMARY KEY AUTOINCREMENT,`ptype` text,`v0` text,`v1` text,`v2` text,`v3` text,`v4` text,`v5` text)",
	"CREATE UNIQUE INDEX idx_casbin_rule ON casbin_rule (ptype,v0,v1,v2,v3,v4,v5)",
}

// TestCasbinAdapterLoadsGormAdapterTables opens a database whose policies
// casbin's gorm-adapter wrote: they load, in the order stored, the schema
// stays as it was, and a change is stored beside them.
func TestCasbinAdapterLoadsGormAdapterTables(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolbelt.db")
	old, err := gorm.Open(sqlite.Open(path), &gorm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append(gormAdapterSchema,
		"INSERT INTO casbin_rule (id, ptype, v0, v1, v2, v3, v4, v5) VALUES "+
			"(1, 'p', 'role:admin', '/api/v1/*', '*', '', '', ''), "+
			"(2, 'p', 'role:agent', '/api/v1/tools', 'GET', '', '', ''), "+
			"(7, 'p', 'principal:2', 'tool:file_read', 'use', '', '', ''), "+
			"(5, 'p', 'principal:2', 'category:shell', 'use', '', '', ''), "+
			"(9, 'g', 'principal:3', 'role:agent', '', '', '', '')") {
		if err := old.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	schema := func(db *gorm.DB) []string {
		var sqls []string
		if err := db.Raw("SELECT sql FROM sqlite_master WHERE tbl_name = 'casbin_rule' ORDER BY name").Scan(&sqls).Error; err != nil {
			t.Fatal(err)
		}
		return sqls
	}
	before := schema(old)
	if db, err := old.DB(); err != nil || db.Close() != nil {
		t.Fatalf("close the old database: %v", err)
	}

	e, store := loadEnforcer(t, func(t *testing.T) *Store { return opened(t)(Open(context.Background(), path)) })
	want := []string{"g,principal:3,role:agent", "p,principal:2,category:shell,use", "p,principal:2,tool:file_read,use",
		"p,role:admin,/api/v1/*,*", "p,role:agent,/api/v1/tools,GET"}
	if got := lines(t, e); !slices.Equal(got, want) {
		t.Fatalf("loaded %q, want %q", got, want)
	}
	if got, _ := e.GetFilteredPolicy(0, "principal:2"); !slices.EqualFunc(got, [][]string{{"principal:2", "category:shell", "use"}, {"principal:2", "tool:file_read", "use"}}, slices.Equal) {
		t.Errorf("principal:2's rules in load order: %q, want by id", got)
	}
	for _, req := range [][]any{{"role:admin", "/api/v1/calls", "POST"}, {"principal:3", "/api/v1/tools", "GET"}} {
		if ok, err := e.Enforce(req...); !ok || err != nil {
			t.Errorf("Enforce%q = %v, %v; want allowed", req, ok, err)
		}
	}
	if after := schema(store.db); !slices.Equal(after, before) {
		t.Errorf("schema after Open:\n%q\nwant gorm-adapter's:\n%q", after, before)
	}
	if _, err := e.UpdateFilteredPolicies([][]string{{"principal:2", "tool:file_write", "use"}}, 0, "principal:2"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddPolicy("role:admin", "/api/v1/*", "*"); err != nil { // already stored: kept once
		t.Fatal(err)
	}
	var rows []CasbinRule
	if err := store.db.Order("id").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Ptype+","+strings.Join(r.values(), ","))
	}
	want = []string{"p,role:admin,/api/v1/*,*", "p,role:agent,/api/v1/tools,GET", "g,principal:3,role:agent", "p,principal:2,tool:file_write,use"}
	if !slices.Equal(got, want) {
		t.Errorf("stored rows by id: %q, want %q", got, want)
	}
}
