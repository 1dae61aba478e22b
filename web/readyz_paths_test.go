package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"toolbelt/handlers/console"
)

// TestReadyzHostPathsForAdminsAlone asks /readyz and the home page for
// the instance's state as every kind of caller (issue 39): the data
// directory's path on the host (the test's temporary directory) is in the
// answer to an admin's key or console session, and nowhere in the answer
// to an anonymous probe, an agent, a reviewer or a wrong key, who read
// $TOOLBELT_DATA_DIR instead.
func TestReadyzHostPathsForAdminsAlone(t *testing.T) {
	t.Parallel()
	app := newTestApp(t)
	dataDir := app.app.Config.DataDir
	ctx := context.Background()
	session := func(role string) string {
		s, err := app.app.Accounts.SignIn(ctx, "192.0.2.7", app.keys[role])
		if err != nil {
			t.Fatal(err)
		}
		return s.Token
	}
	for _, tc := range []struct {
		name, key, cookie string
		admin             bool
	}{
		{name: "anonymous"},
		{name: "agent key", key: app.keys["agent"]},
		{name: "reviewer key", key: app.keys["reviewer"]},
		{name: "wrong key", key: "tb_" + strings.Repeat("0", 64)},
		{name: "reviewer console session", cookie: session("reviewer")},
		{name: "admin key", key: app.keys["admin"], admin: true},
		{name: "admin console session", cookie: session("admin"), admin: true},
	} {
		for _, path := range []string{"/readyz", "/"} {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			if tc.key != "" {
				req.Header.Set("Authorization", "Bearer "+tc.key)
			}
			if tc.cookie != "" {
				req.AddCookie(&http.Cookie{Name: console.SessionCookie, Value: tc.cookie})
			}
			rec := httptest.NewRecorder()
			app.handler.ServeHTTP(rec, req)
			body := rec.Body.Bytes()
			if rec.Code != http.StatusOK {
				t.Errorf("%s, GET %s: %d %s", tc.name, path, rec.Code, body)
				continue
			}
			if shown := bytes.Contains(body, []byte(dataDir)); shown != tc.admin {
				t.Errorf("%s, GET %s: the data directory %s shown = %v, want %v:\n%s", tc.name, path, dataDir, shown, tc.admin, body)
			}
			if path != "/readyz" {
				continue
			}
			var r struct {
				Components map[string]struct{ Detail string }
			}
			if err := json.Unmarshal(body, &r); err != nil {
				t.Fatal(err)
			}
			want := "$TOOLBELT_DATA_DIR"
			if tc.admin {
				want = dataDir
			}
			for _, comp := range []string{"disk", "journal", "sessions"} {
				if d := r.Components[comp].Detail; !strings.Contains(d, want) {
					t.Errorf("%s: %s says %q, want it to name %s", tc.name, comp, d, want)
				}
			}
		}
	}
}
