package web_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"toolbelt/models"
	"toolbelt/services/access"
)

// errMessage is the message of a JSON error answer.
func errMessage(t *testing.T, r response) string {
	t.Helper()
	return fmt.Sprint(r.JSON(t)["error"].(map[string]any)["message"])
}

// TestDisabledPrincipalRefusedAtOnce: disabling a principal refuses its
// keys on the very next request — the API (even with the authentication
// cached), MCP, its console session and a new sign-in — saying it is
// disabled; enabling it lets the same keys in again.
func TestDisabledPrincipalRefusedAtOnce(t *testing.T) {
	app := newTestApp(t)
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	agent := fmt.Sprint(app.ids["agent"])
	b := signedIn(t, app, "agent")
	if r := app.do(t, "agent", "GET", "/api/v1/me", nil); r.Status != 200 { // cached from here
		t.Fatalf("me: %d", r.Status)
	}
	if _, err := mcpConnect(t, app, srv, "agent"); err != nil {
		t.Fatalf("mcp before: %v", err)
	}
	if r := app.do(t, "admin", "POST", "/api/v1/principals/"+agent+"/disable", nil); r.Status != 200 || r.JSON(t)["disabled_at"] == nil {
		t.Fatalf("disable: %d %s", r.Status, r.Body)
	}
	r := app.do(t, "agent", "GET", "/api/v1/me", nil)
	if r.Status != 401 || !strings.Contains(errMessage(t, r), `principal "test-agent" is disabled`) {
		t.Errorf("disabled key: %d %s", r.Status, r.Body)
	}
	if _, err := mcpConnect(t, app, srv, "agent"); err == nil {
		t.Error("a disabled principal's key opened an MCP session")
	}
	if p := b.get("/admin"); p.TestID("sign-in-form").Length() != 1 {
		t.Error("a disabled principal's console session still opens pages")
	}
	p := newBrowserClient(t, app)
	p.get("/admin/login")
	if pg := p.post("/admin/login", url.Values{"key": {app.keys["agent"]}}); !strings.Contains(pg.TestID("error-key").Text(), "disabled") {
		t.Errorf("sign-in of a disabled principal: %d %q", pg.Status, pg.TestID("error-key").Text())
	}
	// Its listing says so.
	for _, pr := range app.do(t, "admin", "GET", "/api/v1/principals", nil).JSON(t)["principals"].([]any) {
		if pr := pr.(map[string]any); pr["name"] == "test-agent" && pr["disabled_at"] == nil {
			t.Error("the listing does not show the principal disabled")
		}
	}
	if r := app.do(t, "admin", "POST", "/api/v1/principals/"+agent+"/enable", nil); r.Status != 200 || r.JSON(t)["disabled_at"] != nil {
		t.Fatalf("enable: %d %s", r.Status, r.Body)
	}
	if r := app.do(t, "agent", "GET", "/api/v1/me", nil); r.Status != 200 {
		t.Errorf("enabled again: %d %s", r.Status, r.Body)
	}
	if _, err := mcpConnect(t, app, srv, "agent"); err != nil {
		t.Errorf("mcp after enabling: %v", err)
	}
}

// TestKeyLabelAndExpiry: a key's label and expiry are stored and listed;
// an expired key is refused with its own message (and does not count as
// a guess), at sign-in too; bad options are 422 at their field.
func TestKeyLabelAndExpiry(t *testing.T) {
	app := newTestApp(t)
	agent := fmt.Sprint(app.ids["agent"])
	soon := time.Now().Add(1500 * time.Millisecond).UTC().Truncate(time.Microsecond)
	r := app.do(t, "admin", "POST", "/api/v1/principals/"+agent+"/keys", map[string]any{"label": "  nightly job ", "expires_at": soon.Format(time.RFC3339Nano)})
	if r.Status != 201 {
		t.Fatalf("issue: %d %s", r.Status, r.Body)
	}
	app.keys["soon"] = r.JSON(t)["key"].(string)
	var listed map[string]any
	for _, pr := range app.do(t, "admin", "GET", "/api/v1/principals", nil).JSON(t)["principals"].([]any) {
		for _, k := range pr.(map[string]any)["keys"].([]any) {
			if k := k.(map[string]any); k["label"] == "nightly job" {
				listed = k
			}
		}
	}
	if listed == nil || listed["expires_at"] == nil {
		t.Fatalf("the listing lacks the key's label or expiry: %v", listed)
	}
	if at, _ := time.Parse(time.RFC3339Nano, listed["expires_at"].(string)); !at.Equal(soon) {
		t.Errorf("expires_at %v, want %v", listed["expires_at"], soon)
	}
	if r := app.do(t, "soon", "GET", "/api/v1/me", nil); r.Status != 200 {
		t.Fatalf("before expiry: %d", r.Status)
	}
	time.Sleep(time.Until(soon) + 50*time.Millisecond)
	for range access.KeyGuesses().Limit + 2 { // cached or not, and never counted as a guess: never a 429
		r := app.do(t, "soon", "GET", "/api/v1/me", nil)
		if r.Status != 401 || !strings.Contains(errMessage(t, r), "expired at") {
			t.Fatalf("expired key: %d %s", r.Status, r.Body)
		}
	}
	b := newBrowserClient(t, app)
	b.get("/admin/login")
	if p := b.post("/admin/login", url.Values{"key": {app.keys["soon"]}}); !strings.Contains(p.TestID("error-key").Text(), "expired") {
		t.Errorf("sign-in with an expired key: %q", p.TestID("error-key").Text())
	}
	if r := app.do(t, "agent", "GET", "/api/v1/me", nil); r.Status != 200 {
		t.Errorf("the principal's other key: %d", r.Status)
	}
	for _, tc := range []struct {
		body    any
		pointer string
	}{
		{map[string]any{"expires_at": "2020-01-01T00:00:00Z"}, "/expires_at"},
		{map[string]any{"label": strings.Repeat("x", 65)}, "/label"},
		{map[string]any{"label": "a\u0007b"}, "/label"},
	} {
		r := app.do(t, "admin", "POST", "/api/v1/principals/"+agent+"/keys", tc.body)
		if r.Status != 422 || !strings.Contains(string(r.Body), `"pointer":"`+tc.pointer+`"`) {
			t.Errorf("%v: %d %s", tc.body, r.Status, r.Body)
		}
	}
	if r := app.do(t, "admin", "POST", "/api/v1/principals/"+agent+"/keys", `{"expires_at": "tomorrow"}`); r.Status != 422 && r.Status != 400 {
		t.Errorf("unreadable expiry: %d %s", r.Status, r.Body)
	}
	// An expired admin key is no way in: the last working one stays
	// unrevocable beside it, and it may go.
	old := app.do(t, "admin", "POST", "/api/v1/principals/1/keys", nil).JSON(t)["id"]
	if err := app.store.DB().Model(&models.APIKey{}).Where("id = ?", old).Update("expires_at", time.Now().Add(-time.Hour)).Error; err != nil {
		t.Fatal(err)
	}
	if r := app.do(t, "admin", "DELETE", "/api/v1/keys/1", nil); r.Status != 409 {
		t.Errorf("revoke the last working admin key beside an expired one: %d %s", r.Status, r.Body)
	}
	if r := app.do(t, "admin", "DELETE", "/api/v1/keys/"+itoa(old), nil); r.Status != 204 {
		t.Errorf("revoke an expired admin key: %d %s", r.Status, r.Body)
	}
	if r := app.do(t, "admin", "POST", "/api/v1/principals", map[string]any{"name": "temp", "role": "agent", "key_expires_at": "2020-01-01T00:00:00Z"}); r.Status != 422 ||
		!strings.Contains(string(r.Body), `"/key_expires_at"`) {
		t.Errorf("a first key already expired: %d %s", r.Status, r.Body)
	}
}

// TestDeletePrincipalGuards: deleting removes the principal, its keys
// (refused at once) and grants; an admin cannot delete or disable
// themselves, and the last admin with a working key cannot be taken away,
// even by an admin whose request passed authentication just before they
// were disabled themselves.
func TestDeletePrincipalGuards(t *testing.T) {
	app := newTestApp(t)
	ctx := context.Background()
	agent := fmt.Sprint(app.ids["agent"])
	app.do(t, "admin", "PUT", "/api/v1/principals/"+agent+"/grants", map[string]any{"categories": []string{"filesystem"}})
	if r := app.do(t, "admin", "DELETE", "/api/v1/principals/"+agent, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := app.do(t, "agent", "GET", "/api/v1/me", nil); r.Status != 401 {
		t.Errorf("a deleted principal's key: %d", r.Status)
	}
	if g, err := app.app.Authz.Grants(app.ids["agent"]); err != nil || len(g.Categories) != 0 {
		t.Errorf("grants outlive the principal: %v %v", g, err)
	}
	for _, path := range []string{"/api/v1/principals/1", "/api/v1/principals/1/disable"} {
		method := map[bool]string{true: "DELETE", false: "POST"}[!strings.HasSuffix(path, "disable")]
		r := app.do(t, "admin", method, path, nil)
		if r.Status != 403 || !strings.Contains(errMessage(t, r), "yourself") {
			t.Errorf("%s %s yourself: %d %s", method, path, r.Status, r.Body)
		}
	}
	for _, path := range []string{"/api/v1/principals/x", "/api/v1/principals/0", "/api/v1/principals/99999999999"} {
		if r := app.do(t, "admin", "DELETE", path, nil); r.Status != 400 {
			t.Errorf("DELETE %s: %d", path, r.Status)
		}
	}
	// A second admin, disabled by the first while its own request to
	// delete the first was on its way: that request finds no other admin.
	second, err := app.app.Accounts.CreatePrincipal(ctx, accessPrincipal("admin2", "admin"), nil)
	if err != nil {
		t.Fatal(err)
	}
	admin2, _ := app.store.PrincipalByID(ctx, second.ID)
	if r := app.do(t, "admin", "POST", fmt.Sprintf("/api/v1/principals/%d/disable", second.ID), nil); r.Status != 200 {
		t.Fatalf("disable admin2: %d %s", r.Status, r.Body)
	}
	for name, change := range map[string]func() error{
		"delete":  func() error { return app.app.Accounts.DeletePrincipal(ctx, 1, admin2) },
		"disable": func() error { _, err := app.app.Accounts.SetDisabled(ctx, 1, true, admin2); return err },
	} {
		if err := change(); !errors.Is(err, models.ErrConflict) || !strings.Contains(err.Error(), "last admin") {
			t.Errorf("%s the last admin: %v", name, err)
		}
	}
	if r := app.do(t, "admin", "GET", "/api/v1/me", nil); r.Status != 200 {
		t.Fatalf("the last admin was locked out: %d", r.Status)
	}
	// The disabled admin's keys do not count as a way in: the first
	// admin's last key stays unrevocable.
	if r := app.do(t, "admin", "DELETE", "/api/v1/keys/1", nil); r.Status != 409 {
		t.Errorf("revoke the last working admin key: %d %s", r.Status, r.Body)
	}
}

func accessPrincipal(name, role string) access.NewPrincipal {
	return access.NewPrincipal{Name: name, Role: role}
}

// TestClusterDisableRefusedEverywhere: a principal disabled on one
// instance is refused on the other at once, although the other had its
// key's authentication cached, over Redis or over Postgres alone.
func TestClusterDisableRefusedEverywhere(t *testing.T) {
	for _, redis := range []bool{false, true} {
		t.Run(map[bool]string{false: "postgres notices", true: "redis notices"}[redis], func(t *testing.T) {
			apps := newCluster(t, 2, redis)
			a, b := apps[0], apps[1]
			if r := b.do(t, "agent", "GET", "/api/v1/me", nil); r.Status != 200 {
				t.Fatalf("me on B: %d", r.Status)
			}
			if r := a.do(t, "admin", "POST", fmt.Sprintf("/api/v1/principals/%d/disable", a.ids["agent"]), nil); r.Status != 200 {
				t.Fatalf("disable on A: %d %s", r.Status, r.Body)
			}
			within(t, "the principal disabled on A refused on B", func() (bool, string) {
				r := b.do(t, "agent", "GET", "/api/v1/me", nil)
				return r.Status == 401, fmt.Sprint(r.Status)
			})
		})
	}
}

// TestConsoleAccessDisableDelete: the access page issues a key with a
// label and an expiry and lists them, disables and enables a principal
// (each saying what happened), deletes one, and answers the admin trying
// it on themselves with the reason on the page; the signed-in admin is
// offered neither.
func TestConsoleAccessDisableDelete(t *testing.T) {
	app := newTestApp(t)
	b := signedIn(t, app, "admin")
	agent := fmt.Sprint(app.ids["agent"])
	p := b.get("/admin/access")
	if me := p.TestID("principal-admin"); me.Find(`[data-testid="principal-you"]`).Length() != 1 ||
		me.Find(`[data-testid="disable"], [data-testid="delete"]`).Length() != 0 {
		t.Error("the signed-in admin is offered to disable or delete themselves")
	}
	expires := time.Now().AddDate(0, 1, 0).UTC().Format(time.DateOnly)
	if p = b.post("/admin/access/principals/"+agent+"/keys", url.Values{"label": {"console key"}, "expires": {expires}}); p.Status != 201 || p.TestID("new-key").AttrOr("value", "") == "" {
		t.Fatalf("issue: %d", p.Status)
	}
	p = b.get("/admin/access")
	row := p.TestID("principal-test-agent").Find(`tbody tr`).Last()
	if row.Find(`[data-testid="key-label"]`).Text() != "console key" || !strings.HasPrefix(strings.TrimSpace(row.Find(`[data-testid="key-expires"]`).Text()), expires) {
		t.Errorf("key row: label %q, expires %q", row.Find(`[data-testid="key-label"]`).Text(), row.Find(`[data-testid="key-expires"]`).Text())
	}
	if p = b.post("/admin/access/principals/"+agent+"/keys", url.Values{"expires": {"2020-01-01"}}); p.Status != 422 || !strings.Contains(p.TestID("alert").Text(), "not in the future") {
		t.Errorf("expired key from the form: %d %q", p.Status, p.TestID("alert").Text())
	}
	p = b.post("/admin/access/principals/"+agent+"/disable", url.Values{})
	if !strings.Contains(p.TestID("notice").Text(), "test-agent disabled") || !strings.Contains(p.TestID("principal-test-agent").Find(`[data-testid="principal-state"]`).Text(), "disabled") ||
		p.TestID("principal-test-agent").Find(`[data-testid="enable"]`).Length() != 1 {
		t.Errorf("after disabling: notice %q", p.TestID("notice").Text())
	}
	if r := app.do(t, "agent", "GET", "/api/v1/me", nil); r.Status != 401 {
		t.Errorf("disabled from the console, the key still works: %d", r.Status)
	}
	p = b.post("/admin/access/principals/"+agent+"/enable", url.Values{})
	if !strings.Contains(p.TestID("notice").Text(), "enabled") || p.TestID("principal-test-agent").Find(`[data-testid="principal-state"]`).Length() != 0 {
		t.Errorf("after enabling: notice %q", p.TestID("notice").Text())
	}
	for _, action := range []string{"disable", "delete"} {
		p = b.post("/admin/access/principals/1/"+action, url.Values{})
		if p.Status != 403 || !strings.Contains(p.TestID("alert").Text(), "yourself") {
			t.Errorf("%s yourself: %d %q", action, p.Status, p.TestID("alert").Text())
		}
	}
	p = b.post("/admin/access/principals/"+agent+"/delete", url.Values{})
	if !strings.Contains(p.TestID("notice").Text(), "deleted") || p.TestID("principal-test-agent").Length() != 0 {
		t.Errorf("after deleting: notice %q", p.TestID("notice").Text())
	}
}
