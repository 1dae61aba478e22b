package web_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"toolbelt/app"
	"toolbelt/services/browser"
	"toolbelt/services/netpolicy"
)

// TestBrowserNavigate opens a page served on 127.0.0.1 in real Chromium
// through POST /calls, with a screenshot, and refuses internal addresses
// under the default policy.
func TestBrowserNavigate(t *testing.T) {
	path, err := browser.Find(os.Getenv("TOOLBELT_CHROMIUM"))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Chromium missing in CI: %v", err)
		}
		t.Skip(err)
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><title>Release notes</title></head><body><h1>Toolbelt 1.2</h1><p>Sandboxed tools arrived.</p><a href="/changelog">Changelog</a></body></html>`)
	}))
	defer page.Close()
	withChromium := func(c *app.Config) { c.Chromium = path }
	allHost := hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true}

	app := newTestAppWith(t, allHost, netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, withChromium)
	code, res := app.call(t, "admin", map[string]any{"tool": "browser_navigate", "session_id": "web",
		"arguments": map[string]any{"url": page.URL + "/notes", "screenshot": true}})
	d := data(res)
	if code != 200 || d["title"] != "Release notes" || !bytes.Contains([]byte(d["text"].(string)), []byte("Sandboxed tools arrived.")) {
		t.Fatalf("%d %v", code, res)
	}
	links, _ := d["links"].([]any)
	if len(links) != 1 || links[0].(map[string]any)["url"] != page.URL+"/changelog" {
		t.Errorf("links %v", links)
	}
	shot, err := os.ReadFile(filepath.Join(app.workDir(t, "admin", "web"), d["screenshot"].(string)))
	if err != nil || !bytes.HasPrefix(shot, []byte("\x89PNG")) {
		t.Errorf("screenshot %v (%d bytes)", err, len(shot))
	}

	// The default policy never opens internal addresses.
	strict := newTestAppWith(t, allHost, netpolicy.Policy{}, withChromium)
	code, res = strict.call(t, "admin", map[string]any{"tool": "browser_navigate", "arguments": map[string]any{"url": page.URL}})
	if errCode(res) != "URL_NOT_ALLOWED" {
		t.Errorf("internal address: %d %v", code, res)
	}
}

// workDir is the host directory of a principal's session.
func (a *testApp) workDir(t *testing.T, role, session string) string {
	t.Helper()
	return filepath.Join(filepath.Dir(a.dbPath), "sessions", fmt.Sprintf("p%d", a.ids[role]), session)
}
