package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"toolbelt/web"
)

// TestRBACMatrix calls every endpoint as every role and checks the exact
// status: 401 without a key, 403 for a role the policy does not allow,
// the endpoint's own answer otherwise. The expectations are written out
// here, independently of the route table, and the table must not hold an
// endpoint this matrix does not cover.
func TestRBACMatrix(t *testing.T) {
	const forbidden = http.StatusForbidden
	publish := func(a *testApp) any {
		def := a.do(a.t, "admin", "GET", "/api/v1/tools/file_read", nil).JSON(a.t)["definition"].(map[string]any)
		def["version"] = "1.1.0"
		return def
	}
	cases := []struct {
		method, route, path string
		body                func(a *testApp) any
		admin               int
		reviewer            int
		agent               int
	}{
		{"GET", "/me", "/api/v1/me", nil, 200, 200, 200},
		// Everyone reaches their own connections (none here).
		{"GET", "/me/connections", "/api/v1/me/connections", nil, 200, 200, 200},
		{"DELETE", "/me/connections/:name", "/api/v1/me/connections/nope", nil, 404, 404, 404},
		{"GET", "/me/callback-secret", "/api/v1/me/callback-secret", nil, 200, forbidden, 200},
		{"POST", "/me/callback-secret/rotate", "/api/v1/me/callback-secret/rotate", nil, 200, forbidden, 200},
		{"GET", "/me/secrets", "/api/v1/me/secrets", nil, 200, 200, 200},
		{"PUT", "/me/secrets/:name", "/api/v1/me/secrets/RBAC_TOKEN", func(*testApp) any { return map[string]string{"value": "rbac-value-0123"} }, 200, 200, 200},
		// Each role may delete its own: none is stored, so 404, not 403.
		{"DELETE", "/me/secrets/:name", "/api/v1/me/secrets/RBAC_TOKEN", nil, 404, 404, 404},
		{"POST", "/principals/:id/callback-secret/rotate", "/api/v1/principals/3/callback-secret/rotate", nil, 200, forbidden, forbidden},
		{"GET", "/tools", "/api/v1/tools", nil, 200, 200, 200},
		{"POST", "/tools", "/api/v1/tools", func(*testApp) any { return toolDef("word_count") }, 201, forbidden, forbidden},
		{"GET", "/tools/:name", "/api/v1/tools/file_read", nil, 200, 200, 200},
		{"PUT", "/tools/:name", "/api/v1/tools/file_read", publish, 200, forbidden, forbidden},
		{"DELETE", "/tools/:name", "/api/v1/tools/file_read", nil, 204, forbidden, forbidden},
		{"GET", "/tools/:name/versions", "/api/v1/tools/file_read/versions", nil, 200, 200, 200},
		{"GET", "/tools/:name/versions/:version", "/api/v1/tools/file_read/versions/1.0.0", nil, 200, 200, 200},
		{"POST", "/tools/:name/rollback", "/api/v1/tools/file_read/rollback", func(*testApp) any { return map[string]any{"version": "1.0.0"} }, 200, forbidden, forbidden},
		{"GET", "/categories", "/api/v1/categories", nil, 200, 200, 200},
		{"POST", "/import/openapi", "/api/v1/import/openapi", func(*testApp) any { return map[string]any{"document": pingDocument} }, 201, forbidden, forbidden},
		// The admin passes the guard and meets no server of that name
		// (TestUpstreamOverHTTP serves a real one).
		{"GET", "/upstreams", "/api/v1/upstreams", nil, 200, forbidden, forbidden},
		{"POST", "/upstreams", "/api/v1/upstreams", func(*testApp) any { return map[string]any{"name": "x", "transport": "ftp", "category": "api"} }, 422, forbidden, forbidden},
		{"GET", "/upstreams/:name", "/api/v1/upstreams/nope", nil, 404, forbidden, forbidden},
		{"PUT", "/upstreams/:name", "/api/v1/upstreams/nope", func(*testApp) any {
			return map[string]any{"transport": "http", "url": "http://127.0.0.1:9/mcp", "category": "api"}
		}, 404, forbidden, forbidden},
		{"DELETE", "/upstreams/:name", "/api/v1/upstreams/nope", nil, 404, forbidden, forbidden},
		{"POST", "/upstreams/:name/sync", "/api/v1/upstreams/nope/sync", nil, 404, forbidden, forbidden},
		{"POST", "/upstreams/:name/disable", "/api/v1/upstreams/nope/disable", nil, 404, forbidden, forbidden},
		{"POST", "/upstreams/:name/enable", "/api/v1/upstreams/nope/enable", nil, 404, forbidden, forbidden},
		{"PUT", "/upstreams/:name/tools/:tool", "/api/v1/upstreams/nope/tools/echo", func(*testApp) any { return map[string]any{"level": "safe"} }, 404, forbidden, forbidden},
		{"POST", "/upstreams/:name/tools/:tool/accept", "/api/v1/upstreams/nope/tools/echo/accept", nil, 404, forbidden, forbidden},
		{"PUT", "/upstreams/:name/tools/:tool/alias", "/api/v1/upstreams/nope/tools/echo/alias", func(*testApp) any { return map[string]any{"alias": "nope_echo"} }, 404, forbidden, forbidden},
		{"POST", "/upstreams/:name/tools/:tool/disable", "/api/v1/upstreams/nope/tools/echo/disable", nil, 404, forbidden, forbidden},
		{"POST", "/upstreams/:name/tools/:tool/enable", "/api/v1/upstreams/nope/tools/echo/enable", nil, 404, forbidden, forbidden},
		{"POST", "/principals", "/api/v1/principals", func(*testApp) any { return map[string]any{"name": "bot", "role": "agent"} }, 201, forbidden, forbidden},
		{"GET", "/principals", "/api/v1/principals", nil, 200, forbidden, forbidden},
		{"POST", "/principals/:id/keys", "/api/v1/principals/3/keys", nil, 201, forbidden, forbidden},
		{"GET", "/principals/:id/grants", "/api/v1/principals/3/grants", nil, 200, forbidden, forbidden},
		{"PUT", "/principals/:id/grants", "/api/v1/principals/3/grants", func(*testApp) any { return map[string]any{"categories": []string{"filesystem"}, "tools": []string{}} }, 200, forbidden, forbidden},
		{"DELETE", "/keys/:id", "/api/v1/keys/2", nil, 204, forbidden, forbidden},
		{"POST", "/principals/:id/disable", "/api/v1/principals/3/disable", nil, 200, forbidden, forbidden},
		{"POST", "/principals/:id/enable", "/api/v1/principals/3/enable", nil, 200, forbidden, forbidden},
		{"DELETE", "/principals/:id", "/api/v1/principals/3", nil, 204, forbidden, forbidden},
		{"GET", "/audit", "/api/v1/audit?action=grants.set", nil, 200, forbidden, forbidden},
		{"POST", "/calls", "/api/v1/calls", func(*testApp) any { return map[string]any{"tool": "file_list", "arguments": map[string]any{}} }, 200, forbidden, 200},
		{"GET", "/calls", "/api/v1/calls", nil, 200, 200, 200},
		{"GET", "/calls/:id", "/api/v1/calls/{call}", nil, 200, 200, 404},
		{"DELETE", "/calls/:id", "/api/v1/calls/{call}", nil, 409, forbidden, 404},
		{"GET", "/calls/:id/events", "/api/v1/calls/{call}/events", nil, 200, 200, 404},
		{"GET", "/stats", "/api/v1/stats?hours=2", nil, 200, 200, forbidden},
		{"GET", "/approvals", "/api/v1/approvals", nil, 200, 200, forbidden},
		// The reviewer decides first; the admin then finds it decided.
		{"POST", "/approvals/:id/approve", "/api/v1/approvals/{appr}/approve", func(*testApp) any { return map[string]any{"reason": "ok"} }, 409, 200, forbidden},
		{"POST", "/approvals/:id/deny", "/api/v1/approvals/{appr}/deny", func(*testApp) any { return map[string]any{"reason": "no"} }, 409, 200, forbidden},
		{"POST", "/tools/select", "/api/v1/tools/select", func(*testApp) any { return map[string]any{"query": "read a config file"} }, 200, 200, 200},
		{"POST", "/selections/:id/feedback", "/api/v1/selections/{sel}/feedback", func(*testApp) any { return map[string]any{"tools": []string{"file_list"}} }, 200, 200, 200},
		{"GET", "/tools/:name/queries", "/api/v1/tools/file_read/queries", nil, 200, forbidden, forbidden},
		{"DELETE", "/tools/:name/queries/:id", "/api/v1/tools/file_read/queries/1", nil, 204, forbidden, forbidden},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			t.Parallel() // an app of its own
			app := newTestApp(t)
			if app.ids["agent"] != 3 || app.ids["reviewer"] != 2 {
				t.Fatalf("fixture ids changed: %v", app.ids)
			}
			// The agent may use filesystem tools; it selected tools and
			// reported using file_read: a selection to give feedback on and
			// learned query 1.
			if r := app.do(t, "admin", "PUT", "/api/v1/principals/3/grants", map[string]any{"categories": []string{"filesystem", "shell"}}); r.Status != 200 {
				t.Fatalf("fixture grants: %d %s", r.Status, r.Body)
			}
			sel := app.do(t, "agent", "POST", "/api/v1/tools/select", map[string]any{"query": "show the config file"}).JSON(t)["selection_id"].(string)
			if r := app.do(t, "agent", "POST", "/api/v1/selections/"+sel+"/feedback", map[string]any{"tools": []string{"file_read"}}); r.Status != 200 {
				t.Fatalf("fixture feedback: %d %s", r.Status, r.Body)
			}
			// A dangerous call by the agent, waiting for approval.
			appr := app.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "shell_exec", "arguments": map[string]any{"command": "ls"}}).JSON(t)["data"].(map[string]any)["approval_id"].(string)
			// A call by the admin, which the agent may not read.
			call := app.do(t, "admin", "POST", "/api/v1/calls", map[string]any{"tool": "file_list"}).JSON(t)["call_id"].(string)
			path := strings.NewReplacer("{sel}", sel, "{call}", call, "{appr}", appr).Replace(tc.path)
			// Admin last: it is the only role whose call changes state.
			for _, role := range []string{"none", "agent", "reviewer", "admin"} {
				want := map[string]int{"none": http.StatusUnauthorized, "agent": tc.agent, "reviewer": tc.reviewer, "admin": tc.admin}[role]
				var body any
				if tc.body != nil {
					body = tc.body(app)
				}
				r := app.do(t, role, tc.method, path, body)
				if r.Status != want {
					t.Errorf("%s: status %d, want %d: %s", role, r.Status, want, r.Body)
				}
				if want == 401 || want == 403 {
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
		covered[tc.method+" "+tc.route] = true
	}
	for _, rt := range web.Routes {
		if !covered[rt.Method+" "+rt.Path] {
			t.Errorf("route %s %s has no row in the RBAC matrix", rt.Method, rt.Path)
		}
	}
}

// pingDocument is the smallest OpenAPI document with one operation.
const pingDocument = `{"openapi": "3.0.3", "info": {"title": "Ping", "version": "1.0.0"},
	"servers": [{"url": "https://ping.example.com"}],
	"paths": {"/ping": {"get": {"operationId": "ping", "responses": {"200": {"description": "pong"}}}}}}`

// TestConsoleRBACMatrix opens every console page, and submits every console
// form, as every role: without a session a page leads to sign in (303) and a
// form is refused (401); a role the policy does not allow gets a 403 page;
// an allowed role gets through (its form may still be invalid, but is
// never refused for its role). The expectations are written out here,
// independently of the page table, and the table must not hold a page this
// matrix does not cover.
func TestConsoleRBACMatrix(t *testing.T) {
	all := []string{"admin", "reviewer", "agent"}
	cases := []struct {
		method, route, path string
		allowed             []string
	}{
		{"GET", "", "/admin", all},
		{"GET", "/tools", "/admin/tools", all},
		{"GET", "/tools/new", "/admin/tools/new", []string{"admin"}},
		{"POST", "/tools/new", "/admin/tools/new", []string{"admin"}},
		{"GET", "/tools/:name", "/admin/tools/file_read", all},
		{"GET", "/tools/:name/edit", "/admin/tools/file_read/edit", []string{"admin"}},
		{"POST", "/tools/:name/edit", "/admin/tools/file_read/edit", []string{"admin"}},
		{"POST", "/tools/:name/rollback", "/admin/tools/file_read/rollback", []string{"admin"}},
		{"POST", "/tools/:name/retire", "/admin/tools/http_request/retire", []string{"admin"}},
		{"POST", "/tools/:name/queries/:id/forget", "/admin/tools/file_read/queries/1/forget", []string{"admin"}},
		{"POST", "/tools/:name/try", "/admin/tools/file_list/try", []string{"admin", "agent"}},
		{"GET", "/playground", "/admin/playground?q=read+a+file", all},
		{"POST", "/playground/feedback", "/admin/playground/feedback", all},
		{"GET", "/approvals", "/admin/approvals", []string{"admin", "reviewer"}},
		{"GET", "/approvals/pending", "/admin/approvals/pending", []string{"admin", "reviewer"}},
		{"POST", "/approvals/:id/approve", "/admin/approvals/{appr}/approve", []string{"admin", "reviewer"}},
		{"POST", "/approvals/:id/deny", "/admin/approvals/{appr}/deny", []string{"admin", "reviewer"}},
		{"GET", "/calls", "/admin/calls", all},
		{"GET", "/calls/:id", "/admin/calls/{call}", all},
		{"GET", "/access", "/admin/access", []string{"admin"}},
		{"POST", "/access/principals", "/admin/access/principals", []string{"admin"}},
		{"POST", "/access/principals/:id/keys", "/admin/access/principals/3/keys", []string{"admin"}},
		{"POST", "/access/keys/:id/revoke", "/admin/access/keys/{key}/revoke", []string{"admin"}},
		{"POST", "/access/principals/:id/grants", "/admin/access/principals/3/grants", []string{"admin"}},
		{"POST", "/access/principals/:id/disable", "/admin/access/principals/3/disable", []string{"admin"}},
		{"POST", "/access/principals/:id/enable", "/admin/access/principals/3/enable", []string{"admin"}},
		{"POST", "/access/principals/:id/delete", "/admin/access/principals/3/delete", []string{"admin"}},
		{"POST", "/access/oauth/:id/revoke", "/admin/access/oauth/1/revoke", []string{"admin"}},
		{"POST", "/access/principals/:id/sessions/:session/end", "/admin/access/principals/3/sessions/" + strings.Repeat("0", 64) + "/end", []string{"admin"}},
		{"GET", "/oauth/consent", "/admin/oauth/consent?id=none", all},
		{"POST", "/oauth/consent", "/admin/oauth/consent", all},
		{"GET", "/connections", "/admin/connections", all},
		{"GET", "/connections/:server/connect", "/admin/connections/nope/connect", all},
		{"GET", "/connections/finish", "/admin/connections/finish?error=access_denied", all},
		{"POST", "/connections/:server/disconnect", "/admin/connections/nope/disconnect", all},
		{"GET", "/servers", "/admin/servers", []string{"admin"}},
		{"POST", "/servers", "/admin/servers", []string{"admin"}},
		{"POST", "/servers/:name/sync", "/admin/servers/nope/sync", []string{"admin"}},
		{"POST", "/servers/:name/disable", "/admin/servers/nope/disable", []string{"admin"}},
		{"POST", "/servers/:name/enable", "/admin/servers/nope/enable", []string{"admin"}},
		{"POST", "/servers/:name/delete", "/admin/servers/nope/delete", []string{"admin"}},
		{"POST", "/servers/:name/tools/:tool/accept", "/admin/servers/nope/tools/echo/accept", []string{"admin"}},
		{"POST", "/servers/:name/tools/:tool/alias", "/admin/servers/nope/tools/echo/alias", []string{"admin"}},
		{"POST", "/servers/:name/tools/:tool/disable", "/admin/servers/nope/tools/echo/disable", []string{"admin"}},
		{"POST", "/servers/:name/tools/:tool/enable", "/admin/servers/nope/tools/echo/enable", []string{"admin"}},
		{"GET", "/audit", "/admin/audit?action=grants.set", []string{"admin"}},
		{"GET", "/audit/export", "/admin/audit/export?format=ndjson", []string{"admin"}},
		{"GET", "/secrets", "/admin/secrets", all},
		{"POST", "/secrets", "/admin/secrets", all},
		{"POST", "/secrets/:name/delete", "/admin/secrets/RBAC_TOKEN/delete", all},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.method+" "+tc.route] = true
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			t.Parallel() // an app of its own
			app := newTestApp(t)
			app.do(t, "admin", "PUT", "/api/v1/principals/3/grants", map[string]any{"categories": []string{"filesystem", "shell"}})
			sel := app.do(t, "agent", "POST", "/api/v1/tools/select", map[string]any{"query": "show the config file"}).JSON(t)["selection_id"].(string)
			app.do(t, "agent", "POST", "/api/v1/selections/"+sel+"/feedback", map[string]any{"tools": []string{"file_read"}})
			appr := app.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "shell_exec", "arguments": map[string]any{"command": "ls"}}).JSON(t)["data"].(map[string]any)["approval_id"].(string)
			call := app.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "file_list"}).JSON(t)["call_id"].(string)
			bot := app.do(t, "admin", "POST", "/api/v1/principals", map[string]any{"name": "bot", "role": "agent"}).JSON(t)
			path := strings.NewReplacer("{appr}", appr, "{call}", call, "{key}", fmt.Sprint(bot["key_id"])).Replace(tc.path)

			// Without a session.
			b := newBrowserClient(t, app)
			b.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			var p page
			if tc.method == "GET" {
				p = b.get(path)
			} else {
				p = b.post(path, url.Values{"_csrf": {"none"}})
			}
			if want := map[string]int{"GET": 303, "POST": 401}[tc.method]; p.Status != want {
				t.Errorf("no session: %d, want %d", p.Status, want)
			}
			// Each role, the allowed ones last (their forms change state).
			roles := slices.Clone(all)
			slices.SortStableFunc(roles, func(a, b string) int {
				return map[bool]int{false: 0, true: 1}[slices.Contains(tc.allowed, a)] - map[bool]int{false: 0, true: 1}[slices.Contains(tc.allowed, b)]
			})
			for _, role := range roles {
				b := signedIn(t, app, role)
				b.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
				if tc.method == "GET" {
					p = b.get(path)
				} else {
					p = b.post(path, url.Values{"reason": {"matrix"}, "session_id": {"m"}})
				}
				if slices.Contains(tc.allowed, role) {
					if p.Status == 401 || p.Status == 403 || p.Status >= 500 {
						t.Errorf("%s may use it: %d %s", role, p.Status, p.TestID("error-message").Text())
					}
				} else if p.Status != 403 || p.TestID("error-page").Length() != 1 {
					t.Errorf("%s may not use it: %d, want a 403 page", role, p.Status)
				}
			}
		})
	}
	for _, p := range web.Pages {
		if !covered[p.Method+" "+p.Path] {
			t.Errorf("page %s %s has no row in the console RBAC matrix", p.Method, p.Path)
		}
	}
}
