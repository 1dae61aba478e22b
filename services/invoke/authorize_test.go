package invoke

import (
	"context"
	"testing"

	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/access"
	"toolbelt/services/tooldef"
)

// TestAuthorizeGuard runs the permission guard alone over roles, levels
// and grants.
func TestAuthorizeGuard(t *testing.T) {
	store, _ := modelstest.Store(t)
	authz, err := access.OpenAuthz(context.Background(), access.AuthzDeps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := authz.SetGrants(1, access.Grants{Categories: []string{"filesystem"}, Tools: []string{"web_search", "http_request"}}); err != nil {
		t.Fatal(err)
	}
	inv := &Invoker{authz: authz}
	ok := ToolResult{Status: models.StatusSucceeded, Success: true}
	step := inv.authorize(func(context.Context, *call) ToolResult { return ok })
	agent := &models.Principal{ID: 1, Role: access.RoleAgent}
	cases := []struct {
		name     string
		caller   *models.Principal
		tool     string
		category string
		level    string
		allowed  bool
	}{
		{"admin calls anything", &models.Principal{ID: 9, Role: access.RoleAdmin}, "shell_exec", "shell", tooldef.LevelDangerous, true},
		{"reviewer calls nothing", &models.Principal{ID: 8, Role: access.RoleReviewer}, "file_read", "filesystem", tooldef.LevelSafe, false},
		{"safe by category", agent, "file_read", "filesystem", tooldef.LevelSafe, true},
		{"moderate by category", agent, "file_write", "filesystem", tooldef.LevelModerate, true},
		{"dangerous by category", agent, "wipe", "filesystem", tooldef.LevelDangerous, true},
		{"safe by tool name", agent, "web_search", "search", tooldef.LevelSafe, true},
		{"moderate needs its category", agent, "http_request", "api", tooldef.LevelModerate, false},
		{"nothing granted", agent, "code_execute", "code", tooldef.LevelModerate, false},
		{"another agent", &models.Principal{ID: 2, Role: access.RoleAgent}, "file_read", "filesystem", tooldef.LevelSafe, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &call{caller: tc.caller, def: tooldef.Definition{Name: tc.tool, Category: tc.category, Security: tooldef.Security{Level: tc.level}}}
			res := step(context.Background(), c)
			if res.Success != tc.allowed || (!tc.allowed && res.Error.Code != models.CodePermissionDenied) {
				t.Errorf("allowed %v, want %v (%+v)", res.Success, tc.allowed, res.Error)
			}
		})
	}
}
