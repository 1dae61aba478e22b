package web_test

import (
	"context"
	"strings"
	"testing"

	"toolbelt/models"
)

// TestHeaderCredentialsNeverStored registers literal credentials in
// headers whose names say nothing (a GitHub token, an AWS key, a Slack
// token, a JWT bearer): a remote MCP server and an http tool are
// refused with a pointer to {{env.NAME}} and nothing is stored; a server
// or a tool stored before the check shows its values masked.
func TestHeaderCredentialsNeverStored(t *testing.T) {
	t.Parallel() // its own app
	app := newTestApp(t)
	ctx := context.Background()
	literals := map[string]string{
		"github": "ghp_Z7vRsQ4tJnWdEmPxK2aBcD9eFgH1iJkL3mN5",
		"aws":    "AKIAZ7VRSQ4TJNWDEMPX",
		"slack":  "xoxb-2458760117-2468310942117-ZQ7vRsQ4tJnWdEmPxK2aBcD9",
		"jwt":    "Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkFkYSJ9.Zk8h3Jm1vQ2xR7tY9uP4sD6fG0hK5lL8nB3cV1xZ2aQ",
	}
	for kind, v := range literals {
		r := app.do(t, "admin", "POST", "/api/v1/upstreams", map[string]any{"name": "leaky-" + kind, "transport": "http",
			"url": "https://mcp.example.com/mcp", "category": "api", "headers": map[string]string{"X-Custom": v}})
		if r.Status != 422 || !strings.Contains(string(r.Body), "/headers/X-Custom") || !strings.Contains(string(r.Body), "{{env.NAME}}") {
			t.Errorf("an upstream with a literal %s credential: %d %s", kind, r.Status, r.Body)
		}
		r = app.do(t, "admin", "POST", "/api/v1/tools", toolDef("leaky_"+kind, func(m map[string]any) {
			m["category"] = "api"
			m["runner"] = map[string]any{"kind": "http", "method": "GET", "url": "https://api.example.com/x", "headers": map[string]string{"X-Custom": v}}
			m["security"] = map[string]any{"level": "safe", "network": true}
		}))
		if r.Status != 422 || !strings.Contains(string(r.Body), "/runner/headers/X-Custom") || !strings.Contains(string(r.Body), "{{env.NAME}}") {
			t.Errorf("an http tool with a literal %s credential: %d %s", kind, r.Status, r.Body)
		}
		if _, _, err := app.store.ToolByName(ctx, "leaky_"+kind, true); err == nil {
			t.Errorf("the http tool with a literal %s credential was stored", kind)
		}
	}
	if ups, err := app.store.Upstreams(ctx); err != nil || len(ups) != 0 {
		t.Errorf("upstreams stored: %v %v", ups, err)
	}
	// A reference passes.
	if r := app.do(t, "admin", "POST", "/api/v1/tools", toolDef("fine_ref", func(m map[string]any) {
		m["category"] = "api"
		m["runner"] = map[string]any{"kind": "http", "method": "GET", "url": "https://api.example.com/x",
			"headers": map[string]string{"X-Custom": "Bearer {{env.TB_TEST_SECRET}}", "Accept": "application/vnd.github+json"}}
		m["security"] = map[string]any{"level": "safe", "network": true}
	})); r.Status != 201 {
		t.Errorf("an http tool with a reference: %d %s", r.Status, r.Body)
	}

	// Stored before the check: shown masked, by the list and by the server.
	if err := app.store.CreateUpstream(ctx, &models.Upstream{Name: "old", Transport: models.TransportHTTP, URL: "https://mcp.example.com/mcp",
		Headers: map[string]string{"X-Custom": literals["github"], "Accept": "application/json"}, Isolation: models.IsolationShared,
		MaxConcurrent: 4, IdleSeconds: 300, Category: "api"}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/v1/upstreams", "/api/v1/upstreams/old"} {
		r := app.do(t, "admin", "GET", path, nil)
		if r.Status != 200 || strings.Contains(string(r.Body), literals["github"]) || !strings.Contains(string(r.Body), `"X-Custom":"[REDACTED:`) ||
			!strings.Contains(string(r.Body), `"Accept":"application/json"`) {
			t.Errorf("GET %s: %d %s", path, r.Status, r.Body)
		}
	}
	// An http tool stored before the check: its definition shows the
	// value masked.
	_, ver, err := app.store.ToolByName(ctx, "fine_ref", false)
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(ver.Definition, "Bearer {{env.TB_TEST_SECRET}}", literals["slack"], 1)
	if err := app.store.DB().Model(&models.ToolVersion{}).Where("id = ?", ver.ID).Update("definition", old).Error; err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/v1/tools/fine_ref", "/api/v1/tools/fine_ref/versions/1.0.0"} {
		r := app.do(t, "admin", "GET", path, nil)
		if r.Status != 200 || strings.Contains(string(r.Body), literals["slack"]) || !strings.Contains(string(r.Body), `"X-Custom":"[REDACTED:`) {
			t.Errorf("GET %s: %d %s", path, r.Status, r.Body)
		}
	}
	// The stored row keeps its value: masking is of what is shown.
	if u, err := app.store.UpstreamByName(ctx, "old"); err != nil || u.Headers["X-Custom"] != literals["github"] {
		t.Errorf("the stored row: %v %v", u, err)
	}
}
