package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/netpolicy"
)

// What records a change besides the audit log: the callers' own work (a
// call, a selection) is kept in its own history, with who made it.
const (
	recordCall      = "a call in the history"
	recordSelection = "a selection in the history"
)

// transient names the requests that change nothing kept: an MCP session
// lives in the server's memory and ends with it (its calls are recorded).
var transient = map[string]string{
	"DELETE /mcp": "ends an MCP session, which lives in memory only",
	// The OAuth protocol's own steps: what a person allows is recorded
	// at consent (oauth.consent) and what an admin revokes at revoke
	// (oauth.revoke); requests, codes and tokens are the protocol's rows.
	"POST /oauth/authorize": "starts an authorization request, as GET does; nothing is granted before the audited consent",
	"POST /oauth/token":     "issues tokens under an audited grant (its last use is kept on the grant)",
	"POST /oauth/revoke":    "a client giving up its own token (RFC 7009); an admin's revocation is audited",
}

// auditedWithAnUpstream are the changes whose records need an OAuth
// upstream a person connected to: TestConnectedAccountsActAsEachPerson
// makes them and checks their entries (connection.disconnect by the
// person).
var auditedWithAnUpstream = map[string]string{
	"POST /admin/connections/:server/disconnect": "connection.disconnect",
	"DELETE /api/v1/me/connections/:name":        "connection.disconnect",
}

// TestEveryStateChangeIsRecorded walks the routes the server has
// registered (the API's, the console's, sign-in and MCP's), makes each
// request that changes something as its role would, and checks that the
// change left its record: one audit entry naming the action and the
// actor, or the call or selection in the caller's history. A route that
// changes something and has no step here fails the test, so a new route
// must say what records it.
func TestEveryStateChangeIsRecorded(t *testing.T) {
	// An upstream MCP server whose tool description the test changes.
	upSrv, forecast := weatherServer(t)

	app := newTestAppWith(t, hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true},
		netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	engine, ok := app.handler.(*gin.Engine)
	if !ok {
		t.Fatalf("the app's handler is a %T, not the Gin engine whose routes the test walks", app.handler)
	}
	srv := httptest.NewServer(app.handler)
	defer srv.Close()
	dangerousWrite(t, app)
	names := map[string]string{}
	for _, role := range []string{"admin", "reviewer", "agent"} {
		names[role] = app.do(t, role, "GET", "/api/v1/me", nil).JSON(t)["name"].(string)
	}
	agent := itoa(app.ids["agent"])
	counts := func(model any) int64 {
		app.invoker.Flush()
		var n int64
		if err := app.store.DB().Model(model).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}

	// A step makes one change through one route (key: its method and
	// path as registered) and says what records it.
	type step struct {
		route  string
		role   string // the API's role, or the console browser's
		do     func(role string) int
		record string // an audit action, recordCall or recordSelection
	}
	api := func(method, path string, body any) func(string) int {
		return func(role string) int {
			r := app.do(t, role, method, path, body)
			if r.Status >= 300 {
				t.Errorf("%s %s as %s: %d %s", method, path, role, r.Status, r.Body)
			}
			return r.Status
		}
	}
	// apiFn builds its request when it runs, from what earlier steps made.
	apiFn := func(method string, path func() string, body func() any) func(string) int {
		return func(role string) int { return api(method, path(), body())(role) }
	}
	browsers := map[string]*browserClient{}
	form := func(path func() string, values url.Values) func(string) int {
		return func(role string) int {
			b := browsers[role]
			if b == nil {
				b = signedIn(t, app, role)
				browsers[role] = b
			}
			p := b.post(path(), values)
			if p.Status >= 300 {
				t.Errorf("POST %s as %s: %d %s", path(), role, p.Status, p.TestID("alert").Text())
			}
			return p.Status
		}
	}
	var selectionID, cancelled, approveID, denyID, queryID, botID, botKey string
	var consoleApprove, consoleDeny, consoleQuery, consoleBot, consoleKey string
	pending := func(tag string) (call, approval string) { return dangerousCall(t, app, "agent", tag) }
	learned := func(tool string) string {
		qs := app.do(t, "admin", "GET", "/api/v1/tools/"+tool+"/queries", nil).JSON(t)["queries"].([]any)
		if len(qs) == 0 {
			t.Fatalf("no learned query of %s to forget", tool)
		}
		return itoa(qs[0].(map[string]any)["id"])
	}
	edited := toolRegisterForm("console_tool")
	edited.Set("version", "1.1.0")
	steps := []step{
		// The API.
		{"POST /api/v1/tools", "admin", api("POST", "/api/v1/tools", toolDef("rec_tool")), models.AuditToolRegister},
		{"PUT /api/v1/tools/:name", "admin", api("PUT", "/api/v1/tools/rec_tool", toolDef("rec_tool", func(m map[string]any) { m["version"] = "1.1.0" })), models.AuditToolPublish},
		{"POST /api/v1/tools/:name/rollback", "admin", api("POST", "/api/v1/tools/rec_tool/rollback", map[string]any{"version": "1.0.0"}), models.AuditToolRollback},
		{"DELETE /api/v1/tools/:name", "admin", api("DELETE", "/api/v1/tools/rec_tool", nil), models.AuditToolRetire},
		{"POST /api/v1/import/openapi", "admin", api("POST", "/api/v1/import/openapi", map[string]any{"document": petstore(t, "petstore.yaml"),
			"base_url": "https://petstore.example.com/v1", "prefix": "shop"}), models.AuditToolImport},
		{"PUT /api/v1/principals/:id/grants", "admin", api("PUT", "/api/v1/principals/"+agent+"/grants", map[string]any{"categories": []string{"filesystem"}}), models.AuditGrantsSet},
		{"POST /api/v1/tools/select", "agent", func(role string) int {
			r := app.do(t, role, "POST", "/api/v1/tools/select", map[string]any{"query": "read the text of a file", "session_id": "rec", "limit": 5})
			selectionID, _ = r.JSON(t)["selection_id"].(string)
			return r.Status
		}, recordSelection},
		{"POST /api/v1/selections/:id/feedback", "agent", func(role string) int {
			r := app.do(t, role, "POST", "/api/v1/selections/"+selectionID+"/feedback", map[string]any{"tools": []string{"file_read"}})
			return r.Status
		}, models.AuditSelectionLearn},
		{"DELETE /api/v1/tools/:name/queries/:id", "admin", apiFn("DELETE", func() string { queryID = learned("file_read"); return "/api/v1/tools/file_read/queries/" + queryID },
			func() any { return nil }), models.AuditQueryForget},
		{"POST /api/v1/calls", "agent", api("POST", "/api/v1/calls", map[string]any{"tool": "file_write", "session_id": "rec",
			"arguments": map[string]any{"path": "a.txt", "content": "a"}}), recordCall},
		// An admin cancels an agent's call.
		{"DELETE /api/v1/calls/:id", "admin", apiFn("DELETE", func() string { cancelled, _ = pending("to cancel"); return "/api/v1/calls/" + cancelled },
			func() any { return nil }), models.AuditCallCancel},
		{"POST /api/v1/approvals/:id/approve", "reviewer", apiFn("POST", func() string {
			_, approveID = pending("to approve")
			return "/api/v1/approvals/" + approveID + "/approve"
		},
			func() any { return map[string]any{"reason": "fine"} }), models.AuditApprovalApprove},
		{"POST /api/v1/approvals/:id/deny", "reviewer", apiFn("POST", func() string { _, denyID = pending("to deny"); return "/api/v1/approvals/" + denyID + "/deny" },
			func() any { return map[string]any{"reason": "no"} }), models.AuditApprovalDeny},
		{"POST /api/v1/me/callback-secret/rotate", "agent", api("POST", "/api/v1/me/callback-secret/rotate", nil), models.AuditCallbackRotate},
		{"PUT /api/v1/me/secrets/:name", "agent", api("PUT", "/api/v1/me/secrets/API_TOKEN", map[string]string{"value": "recorded-by-name-only-0123"}), models.AuditSecretSet},
		{"DELETE /api/v1/me/secrets/:name", "agent", api("DELETE", "/api/v1/me/secrets/API_TOKEN", nil), models.AuditSecretDelete},
		{"POST /api/v1/principals", "admin", func(role string) int {
			r := app.do(t, role, "POST", "/api/v1/principals", map[string]any{"name": "rec-bot", "role": "agent"})
			botID = itoa(r.JSON(t)["id"])
			return r.Status
		}, models.AuditPrincipalCreate},
		{"POST /api/v1/principals/:id/keys", "admin", func(role string) int {
			r := app.do(t, role, "POST", "/api/v1/principals/"+botID+"/keys", map[string]any{"label": "second"})
			botKey = itoa(r.JSON(t)["id"])
			return r.Status
		}, models.AuditKeyIssue},
		{"DELETE /api/v1/keys/:id", "admin", apiFn("DELETE", func() string { return "/api/v1/keys/" + botKey }, func() any { return nil }), models.AuditKeyRevoke},
		// An admin rotates another principal's secret.
		{"POST /api/v1/principals/:id/callback-secret/rotate", "admin", apiFn("POST", func() string { return "/api/v1/principals/" + botID + "/callback-secret/rotate" },
			func() any { return nil }), models.AuditCallbackRotate},
		{"POST /api/v1/principals/:id/disable", "admin", apiFn("POST", func() string { return "/api/v1/principals/" + botID + "/disable" }, func() any { return nil }), models.AuditPrincipalDisable},
		{"POST /api/v1/principals/:id/enable", "admin", apiFn("POST", func() string { return "/api/v1/principals/" + botID + "/enable" }, func() any { return nil }), models.AuditPrincipalEnable},
		{"DELETE /api/v1/principals/:id", "admin", apiFn("DELETE", func() string { return "/api/v1/principals/" + botID }, func() any { return nil }), models.AuditPrincipalDelete},
		{"POST /api/v1/upstreams", "admin", api("POST", "/api/v1/upstreams", map[string]any{"name": "weather", "transport": "http", "url": upSrv.URL, "category": "search"}), models.AuditUpstreamAdd},
		{"PUT /api/v1/upstreams/:name", "admin", api("PUT", "/api/v1/upstreams/weather", map[string]any{"transport": "http", "url": upSrv.URL, "category": "api"}), models.AuditUpstreamUpdate},
		{"PUT /api/v1/upstreams/:name/tools/:tool", "admin", api("PUT", "/api/v1/upstreams/weather/tools/forecast", map[string]any{"level": "moderate"}), models.AuditToolPublish},
		{"POST /api/v1/upstreams/:name/sync", "admin", func(role string) int {
			forecast("Tell the weather in a city, in detail.")
			return api("POST", "/api/v1/upstreams/weather/sync", nil)(role)
		}, models.AuditUpstreamSync},
		{"POST /api/v1/upstreams/:name/tools/:tool/accept", "admin", api("POST", "/api/v1/upstreams/weather/tools/forecast/accept", nil), models.AuditUpstreamAccept},
		{"PUT /api/v1/upstreams/:name/tools/:tool/alias", "admin", api("PUT", "/api/v1/upstreams/weather/tools/forecast/alias", map[string]any{"alias": "weather_forecast"}), models.AuditUpstreamAlias},
		{"POST /api/v1/upstreams/:name/tools/:tool/disable", "admin", api("POST", "/api/v1/upstreams/weather/tools/forecast/disable", nil), models.AuditUpstreamToolDisable},
		{"POST /api/v1/upstreams/:name/tools/:tool/enable", "admin", api("POST", "/api/v1/upstreams/weather/tools/forecast/enable", nil), models.AuditUpstreamToolEnable},
		{"POST /api/v1/upstreams/:name/disable", "admin", api("POST", "/api/v1/upstreams/weather/disable", nil), models.AuditUpstreamDisable},
		{"POST /api/v1/upstreams/:name/enable", "admin", api("POST", "/api/v1/upstreams/weather/enable", nil), models.AuditUpstreamEnable},
		{"DELETE /api/v1/upstreams/:name", "admin", api("DELETE", "/api/v1/upstreams/weather", nil), models.AuditUpstreamDelete},

		// MCP: a call through it is recorded as any call.
		{"POST /mcp", "agent", func(role string) int {
			cs, err := mcpConnect(t, app, srv, role)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if res := mcpCall(t, cs, "file_write", map[string]any{"path": "m.txt", "content": "m"}); res.IsError {
				t.Errorf("MCP call: %s", mcpText(t, res))
			}
			return 200
		}, recordCall},

		// OAuth: a person allowing a client, an admin revoking it.
		{"POST /admin/oauth/consent", "agent", func(role string) int {
			b := signedIn(t, app, role)
			b.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			id := pendingAuthorization(t, app)
			b.get("/admin/oauth/consent?id=" + id)
			p := b.post("/admin/oauth/consent", url.Values{"id": {id}, "decision": {"allow"}})
			if p.Status != http.StatusSeeOther {
				t.Errorf("consent: %d", p.Status)
			}
			return p.Status
		}, models.AuditOAuthConsent},
		{"POST /admin/access/oauth/:id/revoke", "admin", form(func() string {
			var g models.OAuthGrant
			app.store.DB().Where("revoked_at IS NULL").First(&g)
			return fmt.Sprintf("/admin/access/oauth/%d/revoke", g.ID)
		}, url.Values{}), models.AuditOAuthRevoke},
		{"POST /admin/access/principals/:id/sessions/:session/end", "admin", form(func() string {
			signedIn(t, app, "agent")
			var cs models.ConsoleSession
			app.store.DB().Where("principal_id = ?", app.ids["agent"]).Order("created_at DESC").First(&cs)
			return fmt.Sprintf("/admin/access/principals/%d/sessions/%s/end", cs.PrincipalID, cs.Hash)
		}, url.Values{}), models.AuditSignOut},

		// The console: sign-in (a wrong key too) and out, then each form.
		{"POST /admin/login", "anonymous", func(string) int {
			b := newBrowserClient(t, app)
			b.get("/admin/login")
			return b.post("/admin/login", url.Values{"key": {"tb_wrongwrongwrongwrongwrong"}}).Status
		}, models.AuditSignInFailed},
		{"POST /admin/login", "reviewer", func(role string) int { browsers[role] = signedIn(t, app, role); return 200 }, models.AuditSignIn},
		{"POST /admin/logout", "reviewer", func(role string) int {
			p := browsers[role].post("/admin/logout", url.Values{})
			delete(browsers, role)
			return p.Status
		}, models.AuditSignOut},
		{"POST /admin/secrets", "agent", form(fixed("/admin/secrets"), url.Values{"name": {"CONSOLE_TOKEN"}, "value": {"recorded-by-name-only-4567"}}), models.AuditSecretSet},
		{"POST /admin/secrets/:name/delete", "agent", form(fixed("/admin/secrets/CONSOLE_TOKEN/delete"), url.Values{}), models.AuditSecretDelete},
		{"POST /admin/tools/new", "admin", form(fixed("/admin/tools/new"), toolRegisterForm("console_tool")), models.AuditToolRegister},
		{"POST /admin/tools/:name/edit", "admin", form(fixed("/admin/tools/console_tool/edit"), edited), models.AuditToolPublish},
		{"POST /admin/tools/:name/rollback", "admin", form(fixed("/admin/tools/console_tool/rollback"), url.Values{"version": {"1.0.0"}}), models.AuditToolRollback},
		{"POST /admin/tools/:name/retire", "admin", form(fixed("/admin/tools/console_tool/retire"), url.Values{}), models.AuditToolRetire},
		{"POST /admin/tools/:name/try", "admin", form(fixed("/admin/tools/file_write/try"), url.Values{"arg.path": {"c.txt"}, "arg.content": {"c"}, "session_id": {"rec"}}), recordCall},
		{"POST /admin/playground/feedback", "admin", func(role string) int {
			r := app.do(t, role, "POST", "/api/v1/tools/select", map[string]any{"query": "list the files of a folder", "session_id": "rec-console"})
			return form(fixed("/admin/playground/feedback"), url.Values{"selection_id": {r.JSON(t)["selection_id"].(string)}, "tool": {"file_list"}})(role)
		}, models.AuditSelectionLearn},
		{"POST /admin/tools/:name/queries/:id/forget", "admin", func(role string) int {
			consoleQuery = learned("file_list")
			return form(func() string { return "/admin/tools/file_list/queries/" + consoleQuery + "/forget" }, url.Values{})(role)
		}, models.AuditQueryForget},
		{"POST /admin/approvals/:id/approve", "reviewer", func(role string) int {
			_, consoleApprove = pending("console approve")
			return form(func() string { return "/admin/approvals/" + consoleApprove + "/approve" }, url.Values{"reason": {"fine"}})(role)
		}, models.AuditApprovalApprove},
		{"POST /admin/approvals/:id/deny", "reviewer", func(role string) int {
			_, consoleDeny = pending("console deny")
			return form(func() string { return "/admin/approvals/" + consoleDeny + "/deny" }, url.Values{"reason": {"no"}})(role)
		}, models.AuditApprovalDeny},
		{"POST /admin/access/principals", "admin", func(role string) int {
			status := form(fixed("/admin/access/principals"), url.Values{"name": {"console-bot"}, "role": {"agent"}})(role)
			for _, p := range app.do(t, "admin", "GET", "/api/v1/principals", nil).JSON(t)["principals"].([]any) {
				if p := p.(map[string]any); p["name"] == "console-bot" {
					consoleBot = itoa(p["id"])
				}
			}
			return status
		}, models.AuditPrincipalCreate},
		{"POST /admin/access/principals/:id/keys", "admin", func(role string) int {
			status := form(func() string { return "/admin/access/principals/" + consoleBot + "/keys" }, url.Values{"label": {"console key"}})(role)
			for _, p := range app.do(t, "admin", "GET", "/api/v1/principals", nil).JSON(t)["principals"].([]any) {
				if p := p.(map[string]any); p["name"] == "console-bot" {
					for _, k := range p["keys"].([]any) {
						if k := k.(map[string]any); k["label"] == "console key" {
							consoleKey = itoa(k["id"])
						}
					}
				}
			}
			return status
		}, models.AuditKeyIssue},
		{"POST /admin/access/keys/:id/revoke", "admin", form(func() string { return "/admin/access/keys/" + consoleKey + "/revoke" }, url.Values{}), models.AuditKeyRevoke},
		{"POST /admin/access/principals/:id/grants", "admin", form(func() string { return "/admin/access/principals/" + consoleBot + "/grants" }, url.Values{"category": {"filesystem"}}), models.AuditGrantsSet},
		{"POST /admin/access/principals/:id/disable", "admin", form(func() string { return "/admin/access/principals/" + consoleBot + "/disable" }, url.Values{}), models.AuditPrincipalDisable},
		{"POST /admin/access/principals/:id/enable", "admin", form(func() string { return "/admin/access/principals/" + consoleBot + "/enable" }, url.Values{}), models.AuditPrincipalEnable},
		{"POST /admin/access/principals/:id/delete", "admin", form(func() string { return "/admin/access/principals/" + consoleBot + "/delete" }, url.Values{}), models.AuditPrincipalDelete},
		{"POST /admin/servers", "admin", form(fixed("/admin/servers"), url.Values{"name": {"weather2"}, "transport": {"http"}, "url": {upSrv.URL}, "category": {"search"}}), models.AuditUpstreamAdd},
		{"POST /admin/servers/:name/sync", "admin", func(role string) int {
			forecast("Tell the weather in a city, in more detail.")
			return form(fixed("/admin/servers/weather2/sync"), url.Values{})(role)
		}, models.AuditUpstreamSync},
		{"POST /admin/servers/:name/tools/:tool/accept", "admin", form(fixed("/admin/servers/weather2/tools/forecast/accept"), url.Values{}), models.AuditUpstreamAccept},
		{"POST /admin/servers/:name/tools/:tool/alias", "admin", form(fixed("/admin/servers/weather2/tools/forecast/alias"), url.Values{"alias": {"weather2_forecast"}}), models.AuditUpstreamAlias},
		{"POST /admin/servers/:name/tools/:tool/disable", "admin", form(fixed("/admin/servers/weather2/tools/forecast/disable"), url.Values{}), models.AuditUpstreamToolDisable},
		{"POST /admin/servers/:name/tools/:tool/enable", "admin", form(fixed("/admin/servers/weather2/tools/forecast/enable"), url.Values{}), models.AuditUpstreamToolEnable},
		{"POST /admin/servers/:name/disable", "admin", form(fixed("/admin/servers/weather2/disable"), url.Values{}), models.AuditUpstreamDisable},
		{"POST /admin/servers/:name/enable", "admin", form(fixed("/admin/servers/weather2/enable"), url.Values{}), models.AuditUpstreamEnable},
		{"POST /admin/servers/:name/delete", "admin", form(fixed("/admin/servers/weather2/delete"), url.Values{}), models.AuditUpstreamDelete},
	}

	covered := map[string]bool{}
	for _, st := range steps {
		last := lastAuditID(t, app)
		calls, selections := counts(&models.Call{}), counts(&models.Selection{})
		st.do(st.role)
		covered[st.route] = true
		switch st.record {
		case recordCall:
			if n := counts(&models.Call{}); n <= calls {
				t.Errorf("%s as %s: no call recorded (%d before, %d after)", st.route, st.role, calls, n)
			}
		case recordSelection:
			if n := counts(&models.Selection{}); n <= selections {
				t.Errorf("%s as %s: no selection recorded (%d before, %d after)", st.route, st.role, selections, n)
			}
		default:
			actor := names[st.role]
			if st.role == "anonymous" {
				actor = models.Anonymous
			}
			got := auditSince(t, app, last)
			found := slices.ContainsFunc(got, func(e map[string]any) bool { return e["action"] == st.record && e["actor"] == actor })
			if !found {
				t.Errorf("%s as %s: no %s entry by %s; the log got %v", st.route, st.role, st.record, actor, got)
			}
		}
	}

	// Every registered route that changes something has its step.
	for _, r := range engine.Routes() {
		key := r.Method + " " + r.Path
		if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions || covered[key] || transient[key] != "" || auditedWithAnUpstream[key] != "" {
			continue
		}
		t.Errorf("%s changes something and no step here shows what records it", key)
	}
	for key := range transient {
		method, path, _ := strings.Cut(key, " ")
		if !slices.ContainsFunc(engine.Routes(), func(r gin.RouteInfo) bool { return r.Method == method && r.Path == path }) {
			t.Errorf("%s is listed as transient but not registered", key)
		}
	}
}

// TestSignInGuessesAreAuditedUpToTheLimit: a guesser at the console's
// sign-in is recorded, with its address, for each wrong key the guess
// limit answers 401; the keys past it (429) write nothing more, so a
// flood of guesses cannot flood the audit log. A right key from the same
// address still signs in, and is recorded as the principal's.
func TestSignInGuessesAreAuditedUpToTheLimit(t *testing.T) {
	app := newTestApp(t)
	last := lastAuditID(t, app)
	b := newBrowserClient(t, app)
	b.get("/admin/login")
	limited := 0
	for i := range 3 * access.KeyGuesses().Limit {
		if p := b.post("/admin/login", url.Values{"key": {fmt.Sprintf("tb_guess%030d", i)}}); p.Status == http.StatusTooManyRequests {
			limited++
		}
	}
	failed := 0
	for _, e := range auditSince(t, app, last) {
		if e["action"] == models.AuditSignInFailed {
			failed++
			if e["actor"] != models.Anonymous || e["via"] != "console" || e["client_ip"] != "127.0.0.1" || e["detail"] != "unknown key" {
				t.Errorf("a refused sign-in's entry: %v", e)
			}
		}
	}
	if want := int(access.KeyGuesses().Limit); failed != want || limited != 2*want {
		t.Errorf("%d refused sign-ins recorded and %d limited, want %d and %d", failed, limited, want, 2*want)
	}
	last = lastAuditID(t, app)
	signedIn(t, app, "reviewer")
	if got := auditSince(t, app, last); len(got) != 1 || got[0]["action"] != models.AuditSignIn || got[0]["actor"] != "test-reviewer" {
		t.Errorf("the reviewer's sign-in from the guesser's address: %v", got)
	}
}
