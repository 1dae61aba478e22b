package web

import (
	"net/http"
	"strings"
	"testing"
)

// TestRBACMatrix calls every endpoint as every role and checks the exact
// status: 401 without a key, 403 for a role the policy does not allow,
// the endpoint's own answer otherwise. The expectations are written out
// here, independently of the route table, and the table must not hold an
// endpoint this matrix does not cover.
func TestRBACMatrix(t *testing.T) {
	const forbidden = http.StatusForbidden
	publish := func(a *testApp) any {
		def := a.do(t, "admin", "GET", "/api/v1/tools/file_read", nil).JSON(t)["definition"].(map[string]any)
		def["version"] = "1.1.0"
		return def
	}
	cases := []struct {
		method, path string
		body         func(a *testApp) any
		admin        int
		reviewer     int
		agent        int
	}{
		{"GET", "/api/v1/me", nil, 200, 200, 200},
		{"GET", "/api/v1/tools", nil, 200, 200, 200},
		{"POST", "/api/v1/tools", func(*testApp) any { return toolDef("word_count") }, 201, forbidden, forbidden},
		{"GET", "/api/v1/tools/file_read", nil, 200, 200, 200},
		{"PUT", "/api/v1/tools/file_read", publish, 200, forbidden, forbidden},
		{"DELETE", "/api/v1/tools/file_read", nil, 204, forbidden, forbidden},
		{"GET", "/api/v1/tools/file_read/versions", nil, 200, 200, 200},
		{"GET", "/api/v1/tools/file_read/versions/1.0.0", nil, 200, 200, 200},
		{"POST", "/api/v1/tools/file_read/rollback", func(*testApp) any { return map[string]any{"version": "1.0.0"} }, 200, forbidden, forbidden},
		{"GET", "/api/v1/categories", nil, 200, 200, 200},
		{"POST", "/api/v1/principals", func(*testApp) any { return map[string]any{"name": "bot", "role": "agent"} }, 201, forbidden, forbidden},
		{"GET", "/api/v1/principals", nil, 200, forbidden, forbidden},
		{"POST", "/api/v1/principals/3/keys", nil, 201, forbidden, forbidden},
		{"GET", "/api/v1/principals/3/grants", nil, 200, forbidden, forbidden},
		{"PUT", "/api/v1/principals/3/grants", func(*testApp) any { return map[string]any{"categories": []string{"filesystem"}, "tools": []string{}} }, 200, forbidden, forbidden},
		{"DELETE", "/api/v1/keys/2", nil, 204, forbidden, forbidden},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			app := newTestApp(t)
			if app.ids["agent"] != 3 || app.ids["reviewer"] != 2 {
				t.Fatalf("fixture ids changed: %v", app.ids)
			}
			// Admin last: it is the only role whose call changes state.
			for _, role := range []string{"none", "agent", "reviewer", "admin"} {
				want := map[string]int{"none": http.StatusUnauthorized, "agent": tc.agent, "reviewer": tc.reviewer, "admin": tc.admin}[role]
				var body any
				if tc.body != nil {
					body = tc.body(app)
				}
				r := app.do(t, role, tc.method, tc.path, body)
				if r.Status != want {
					t.Errorf("%s: status %d, want %d: %s", role, r.Status, want, r.Body)
				}
				if want >= 400 {
					code := r.JSON(t)["error"].(map[string]any)["code"]
					wantCode := map[int]string{401: "UNAUTHORIZED", 403: "FORBIDDEN"}[want]
					if code != wantCode {
						t.Errorf("%s: error code %v, want %s", role, code, wantCode)
					}
				}
			}
		})
	}
	for _, tc := range cases {
		covered[tc.method+" "+tc.path] = true
	}
	for _, rt := range routes {
		id := "3" // the agent
		if rt.path == "/keys/:id" {
			id = "2" // the reviewer's key
		}
		path := strings.NewReplacer(":name", "file_read", ":version", "1.0.0", ":id", id).Replace(APIPrefix + rt.path)
		if !covered[rt.method+" "+path] {
			t.Errorf("route %s %s has no row in the RBAC matrix", rt.method, rt.path)
		}
	}
}
