package web_test

import (
	"encoding/json"
	"io/fs"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"toolbelt/internal/nodetest"
	"toolbelt/web"
)

// conformanceScenarios are the scenarios of the official MCP conformance
// suite (@modelcontextprotocol/conformance, `conformance list --server`)
// that apply to a gateway: they need none of the suite's own tools,
// resources or prompts, only the protocol.
var conformanceScenarios = []string{
	"server-initialize",
	"ping",
	"tools-list",
	"dns-rebinding-protection",
	"logging-set-level",
	"server-sse-multiple-streams",
}

// conformanceReported are scenarios whose checks are logged, not asserted:
// server-sse-polling calls the suite's own test_reconnection tool, which a
// gateway does not have, so its main check cannot pass; its SHOULD checks
// (a priming event, a retry field) are worth reading.
var conformanceReported = []string{"server-sse-polling"}

// conformanceCheck is one check of a scenario, as the suite writes it.
type conformanceCheck struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Status       string          `json:"status"`
	ErrorMessage string          `json:"errorMessage"`
	Details      json.RawMessage `json:"details"`
}

// TestConformance runs the official MCP conformance suite against /mcp.
// The suite sends no credentials, so it talks to a loopback reverse proxy
// that adds the agent's key and passes everything else, Host and Origin
// among it, through unchanged.
func TestConformance(t *testing.T) {
	nodetest.Frameworks(t)
	app := newTestApp(t)
	srv := httptest.NewServer(app.handler)
	t.Cleanup(srv.Close)
	target, _ := url.Parse(srv.URL)
	key := app.keys["agent"]
	proxy := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set("Authorization", "Bearer "+key)
		},
		FlushInterval: -1,
	})
	t.Cleanup(proxy.Close)

	for _, scenario := range append(conformanceScenarios, conformanceReported...) {
		asserted := slices.Contains(conformanceScenarios, scenario)
		t.Run(scenario, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			out, err := nodetest.ExecFramework(t, nil, "conformance", "server",
				"--url", proxy.URL+web.MCPPath, "--scenario", scenario, "-o", dir)
			checks := conformanceChecks(t, dir)
			if len(checks) == 0 {
				var files []string
				_ = filepath.WalkDir(dir, func(path string, _ fs.DirEntry, _ error) error { files = append(files, path); return nil })
				t.Fatalf("conformance %s wrote no checks (%v) in %v:\n%s", scenario, err, files, out)
			}
			for _, c := range checks {
				if c.Status != "SUCCESS" && !asserted {
					t.Logf("%s: %s %s: %s (not asserted)", c.ID, c.Status, c.Description, c.ErrorMessage)
				} else if c.Status != "SUCCESS" {
					t.Errorf("%s: %s %s: %s %s", c.ID, c.Status, c.Description, c.ErrorMessage, c.Details)
				} else {
					t.Logf("%s: %s", c.ID, c.Status)
				}
			}
			if err != nil && asserted && !t.Failed() {
				t.Errorf("conformance %s: %v\n%s", scenario, err, out)
			}
		})
	}
}

// conformanceChecks reads the checks the suite wrote under dir.
func conformanceChecks(t *testing.T, dir string) []conformanceCheck {
	t.Helper()
	var checks []conformanceCheck
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "checks.json") {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Error(err)
			return nil
		}
		var cs []conformanceCheck
		if err := json.Unmarshal(raw, &cs); err != nil {
			t.Errorf("%s: %v", path, err)
			return nil
		}
		checks = append(checks, cs...)
		return nil
	})
	return checks
}
