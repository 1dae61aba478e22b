package web_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestPrincipalsAndKeys covers creating accounts, issuing and revoking keys,
// and that keys are stored only as hashes.
func TestPrincipalsAndKeys(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	r := app.do(t, "admin", "POST", "/api/v1/principals", map[string]any{"name": "research-bot", "role": "agent"})
	if r.Status != http.StatusCreated || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("create: %d %v %s", r.Status, r.Header, r.Body)
	}
	created := r.JSON(t)
	key := created["key"].(string)
	if !strings.HasPrefix(key, "tb_") || len(key) != 67 {
		t.Fatalf("key %q", key)
	}
	app.keys["bot"] = key
	if me := app.do(t, "bot", "GET", "/api/v1/me", nil).JSON(t); me["name"] != "research-bot" || me["role"] != "agent" {
		t.Fatalf("me: %v", me)
	}
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
	}{
		{"taken name", map[string]any{"name": "research-bot", "role": "agent"}, 409},
		{"unknown role", map[string]any{"name": "x", "role": "root"}, 422},
		{"bad name", map[string]any{"name": "a b/c", "role": "agent"}, 422},
		{"empty", map[string]any{}, 422},
		{"right-to-left override in the name", map[string]any{"name": "ci\u202Etob", "role": "agent"}, 422},
		{"right-to-left override in the key label", map[string]any{"name": "ci-1", "role": "agent", "key_label": "ci\u202Eyolped"}, 422},
		{"isolate in the key label", map[string]any{"name": "ci-2", "role": "agent", "key_label": "ci \u2067deploy\u2069"}, 422},
		{"escape in the key label", map[string]any{"name": "ci-3", "role": "agent", "key_label": "ci \x1b[2Jdeploy"}, 422},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := app.do(t, "admin", "POST", "/api/v1/principals", tc.body); r.Status != tc.status {
				t.Errorf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
		})
	}

	if r := app.do(t, "admin", "POST", "/api/v1/principals/"+itoa(created["id"])+"/keys", map[string]any{"label": "ci\u200Fdeploy"}); r.Status != 422 || !strings.Contains(string(r.Body), "U+200F") {
		t.Errorf("a key label with U+200F: %d %s", r.Status, r.Body)
	}

	// A second key works alongside the first; revoking one stops only it.
	r = app.do(t, "admin", "POST", "/api/v1/principals/"+itoa(created["id"])+"/keys", nil)
	if r.Status != http.StatusCreated {
		t.Fatalf("issue: %d %s", r.Status, r.Body)
	}
	second := r.JSON(t)
	app.keys["bot2"] = second["key"].(string)
	if r := app.do(t, "bot2", "GET", "/api/v1/me", nil); r.Status != 200 {
		t.Fatalf("second key: %d", r.Status)
	}
	if r := app.do(t, "admin", "DELETE", "/api/v1/keys/"+itoa(created["key_id"]), nil); r.Status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	if r := app.do(t, "bot", "GET", "/api/v1/me", nil); r.Status != http.StatusUnauthorized {
		t.Errorf("revoked key: %d", r.Status)
	}
	if r := app.do(t, "bot2", "GET", "/api/v1/me", nil); r.Status != 200 {
		t.Errorf("other key after revoke: %d", r.Status)
	}
	if r := app.do(t, "admin", "DELETE", "/api/v1/keys/"+itoa(created["key_id"]), nil); r.Status != 404 {
		t.Errorf("revoke twice: %d", r.Status)
	}
	if r := app.do(t, "admin", "POST", "/api/v1/principals/999/keys", nil); r.Status != 404 {
		t.Errorf("key for a missing principal: %d", r.Status)
	}

	// The listing shows keys by prefix and never the secret.
	r = app.do(t, "admin", "GET", "/api/v1/principals", nil)
	if bytes.Contains(r.Body, []byte(key)) || bytes.Contains(r.Body, []byte(app.keys["admin"])) {
		t.Fatal("principal listing reveals a key")
	}
	var bot map[string]any
	for _, p := range r.JSON(t)["principals"].([]any) {
		if p.(map[string]any)["name"] == "research-bot" {
			bot = p.(map[string]any)
		}
	}
	keys := bot["keys"].([]any)
	if len(keys) != 2 || keys[0].(map[string]any)["revoked_at"] == nil || keys[1].(map[string]any)["prefix"] != app.keys["bot2"][:9] {
		t.Errorf("keys %v", keys)
	}

	// The database holds no key in plain text.
	stored := app.stored(t)
	for _, k := range []string{key, app.keys["bot2"], app.keys["admin"]} {
		if strings.Contains(stored, k) {
			t.Errorf("key %s… stored in plain text", k[:9])
		}
	}

	// Wrong and malformed credentials are 401 alike.
	for _, h := range []string{"Bearer tb_0000", "Basic abc", "Bearer", "tb_" + strings.Repeat("0", 64)} {
		req, _ := http.NewRequest("GET", "/api/v1/me", nil)
		req.Header.Set("Authorization", h)
		rec := newRecorder()
		app.handler.ServeHTTP(rec, req)
		if rec.Code != 401 || rec.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: %d", h, rec.Code)
		}
	}
}

// TestLastAdminKey refuses to revoke the only way in as admin.
func TestLastAdminKey(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	if r := app.do(t, "admin", "DELETE", "/api/v1/keys/1", nil); r.Status != http.StatusConflict {
		t.Fatalf("revoking the last admin key: %d %s", r.Status, r.Body)
	}
	r := app.do(t, "admin", "POST", "/api/v1/principals", map[string]any{"name": "second-admin", "role": "admin"})
	app.keys["admin2"] = r.JSON(t)["key"].(string)
	if r := app.do(t, "admin2", "DELETE", "/api/v1/keys/1", nil); r.Status != http.StatusNoContent {
		t.Fatalf("revoking with another admin key present: %d %s", r.Status, r.Body)
	}
	if r := app.do(t, "admin", "GET", "/api/v1/me", nil); r.Status != 401 {
		t.Errorf("revoked admin key still works: %d", r.Status)
	}
}

// TestGrants stores what an agent may use as Casbin policies.
func TestGrants(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	agent := itoa(app.ids["agent"])
	r := app.do(t, "admin", "PUT", "/api/v1/principals/"+agent+"/grants",
		map[string]any{"categories": []string{"search", "filesystem", "search"}, "tools": []string{"web_search"}})
	if r.Status != 200 {
		t.Fatalf("set grants: %d %s", r.Status, r.Body)
	}
	got := app.do(t, "admin", "GET", "/api/v1/principals/"+agent+"/grants", nil).JSON(t)
	if !slices.Equal(toStrings(got["categories"]), []string{"filesystem", "search"}) || !slices.Equal(toStrings(got["tools"]), []string{"web_search"}) {
		t.Errorf("grants %v", got)
	}
	// Replacing is whole: the old grants go.
	app.do(t, "admin", "PUT", "/api/v1/principals/"+agent+"/grants", map[string]any{"categories": []string{"code"}})
	got = app.do(t, "admin", "GET", "/api/v1/principals/"+agent+"/grants", nil).JSON(t)
	if !slices.Equal(toStrings(got["categories"]), []string{"code"}) || len(toStrings(got["tools"])) != 0 {
		t.Errorf("grants after replace %v", got)
	}
	for _, tc := range []struct {
		name, id string
		body     map[string]any
		status   int
	}{
		{"unknown category", agent, map[string]any{"categories": []string{"database"}}, 422},
		{"bad tool name", agent, map[string]any{"tools": []string{"Rm -rf"}}, 422},
		// A grant by name covers safe tools only: these would be saved
		// and do nothing (a moderate or dangerous tool needs its category).
		{"no such tool", agent, map[string]any{"tools": []string{"web_search", "no_such_tool"}}, 422},
		{"dangerous tool by name", agent, map[string]any{"tools": []string{"shell_exec"}}, 422},
		{"moderate tool by name", agent, map[string]any{"tools": []string{"file_write"}}, 422},
		{"not an agent", itoa(app.ids["reviewer"]), map[string]any{"categories": []string{"code"}}, 422},
		{"missing principal", "999", map[string]any{"categories": []string{"code"}}, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := app.do(t, "admin", "PUT", "/api/v1/principals/"+tc.id+"/grants", tc.body); r.Status != tc.status {
				t.Errorf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
		})
	}
	// A failed update left the grants as they were.
	got = app.do(t, "admin", "GET", "/api/v1/principals/"+agent+"/grants", nil).JSON(t)
	if !slices.Equal(toStrings(got["categories"]), []string{"code"}) {
		t.Errorf("grants changed by a refused update: %v", got)
	}
	// The policies are in the database: a new enforcer over the same file
	// sees them.
	var n int64
	if err := app.store.DB().WithContext(context.Background()).Table("casbin_rule").
		Where("v0 = ? AND v1 = ?", "principal:"+agent, "category:code").Count(&n).Error; err != nil || n != 1 {
		t.Errorf("grant rows in casbin_rule: %d, %v", n, err)
	}
}

// TestHealthAndPages checks the endpoints outside the API.
func TestHealthAndPages(t *testing.T) {
	t.Parallel() // its own app and database
	app := newTestApp(t)
	if r := app.do(t, "none", "GET", "/healthz", nil); r.Status != 200 || r.JSON(t)["status"] != "ok" {
		t.Errorf("healthz: %d %s", r.Status, r.Body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := app.do(t, "none", "HEAD", path, nil); r.Status != 200 {
			t.Errorf("HEAD %s: %d", path, r.Status)
		}
	}
	r := app.do(t, "none", "GET", "/readyz", nil)
	ready := r.JSON(t)
	if r.Status != 200 || ready["ready"] != true || ready["components"].(map[string]any)["database"].(map[string]any)["status"] != "ok" {
		t.Errorf("readyz: %d %s", r.Status, r.Body)
	}
	r = app.do(t, "none", "GET", "/", nil)
	if r.Status != 200 || !bytes.Contains(r.Body, []byte(`data-testid="link-swagger"`)) || !bytes.Contains(r.Body, []byte(`data-testid="component-database"`)) {
		t.Errorf("home: %d %s", r.Status, r.Body)
	}
	if r := app.do(t, "none", "GET", "/static/app.css", nil); r.Status != 200 {
		t.Errorf("static: %d", r.Status)
	}
	r = app.do(t, "none", "GET", "/swagger/doc.json", nil)
	if r.Status != 200 || !bytes.Contains(r.Body, []byte(`"/api/v1/tools/{name}/rollback"`)) {
		t.Errorf("swagger doc: %d %.200s", r.Status, r.Body)
	}
	if r := app.do(t, "none", "GET", "/swagger/index.html", nil); r.Status != 200 || !bytes.Contains(r.Body, []byte("swagger-ui")) {
		t.Errorf("swagger ui: %d", r.Status)
	}
}

// itoa formats an id decoded from JSON (float64) or held as uint.
func itoa(v any) string { return fmt.Sprint(v) }

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
