package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/services/netpolicy"
)

// headerLog records every header a server received.
type headerLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *headerLog) add(r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, vs := range r.Header {
		l.seen = append(l.seen, name+": "+strings.Join(vs, ","))
	}
}

// holding reports the headers that hold s.
func (l *headerLog) holding(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, h := range l.seen {
		if strings.Contains(h, s) {
			out = append(out, h)
		}
	}
	return out
}

// TestRedirectKeepsCredentialsHome attacks the credentials of a remote
// MCP server and of an http tool with a redirect: a server on one port
// answers 307 to a server on another port of the same host, which
// records what it receives. The redirect is refused with an
// UPSTREAM_ERROR naming where it led, and the other port never sees the
// secret (neither as Authorization, which Go's client keeps for another
// port, nor as a custom header, which it keeps anywhere). A redirect
// within the origin is still followed with the credentials.
func TestRedirectKeepsCredentialsHome(t *testing.T) {
	t.Parallel() // its own servers and app
	elsewhere := &headerLog{}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.add(r)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	}))
	t.Cleanup(other.Close) // after the app's, which ends its streams

	s := mcp.NewServer(&mcp.Implementation{Name: "weather", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "forecast", Description: "Tell the weather in a city.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			City string `json:"city"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sun in " + in.City}}}, nil, nil
		})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	var redirecting atomic.Bool
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/moved":
			http.Redirect(w, r, "/api", http.StatusTemporaryRedirect)
		case r.URL.Path == "/api":
			if r.Header.Get("Authorization") != "Bearer "+testSecret || r.Header.Get("X-Api-Key") != testSecret {
				http.Error(w, "no credentials", http.StatusUnauthorized)
				return
			}
			_, _ = w.Write([]byte("welcome home"))
		case r.URL.Path == "/away" || redirecting.Load():
			http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
		default:
			if r.Header.Get("Authorization") != "Bearer "+testSecret {
				http.Error(w, "no credentials", http.StatusUnauthorized)
				return
			}
			mcpHandler.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(home.Close)
	app := newTestAppWith(t, hostCaps{Sandbox: true}, netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	credentials := map[string]string{"Authorization": "Bearer {{env.TB_TEST_SECRET}}", "X-Api-Key": "{{env.TB_TEST_SECRET}}"}
	otherOrigin := strings.TrimPrefix(other.URL, "http://")

	// A remote MCP server that redirects at once is refused at
	// registration, saying where it led.
	redirecting.Store(true)
	register := map[string]any{"name": "weather", "transport": "http", "url": home.URL + "/mcp", "category": "api", "headers": credentials}
	if r := app.do(t, "admin", "POST", "/api/v1/upstreams", register); r.Status == 201 || !strings.Contains(string(r.Body), otherOrigin) {
		t.Errorf("a server that redirects elsewhere: %d %s", r.Status, r.Body)
	}
	// One that redirects once registered fails the call so.
	redirecting.Store(false)
	if r := app.do(t, "admin", "POST", "/api/v1/upstreams", register); r.Status != 201 {
		t.Fatalf("add: %d %s", r.Status, r.Body)
	}
	if code, res := app.call(t, "admin", map[string]any{"tool": "weather__forecast", "arguments": map[string]any{"city": "Oslo"}}); code != 200 || !strings.Contains(string(mustJSON(res["data"])), "sun in Oslo") {
		t.Fatalf("a call before the redirect: %d %v", code, res)
	}
	redirecting.Store(true)
	code, res := app.call(t, "admin", map[string]any{"tool": "weather__forecast", "arguments": map[string]any{"city": "Oslo"}})
	if res["success"] != false || errCode(res) != "UPSTREAM_ERROR" || !strings.Contains(string(mustJSON(res["error"])), otherOrigin) {
		t.Errorf("a call redirected elsewhere: %d %v", code, res)
	}
	redirecting.Store(false)

	// An http tool with the same credentials: elsewhere refused, at home
	// followed.
	for name, path := range map[string]string{"fetch_away": "/away", "fetch_moved": "/moved"} {
		def := toolDef(name, func(m map[string]any) {
			m["category"] = "api"
			m["runner"] = map[string]any{"kind": "http", "method": "GET", "url": home.URL + path, "headers": credentials}
			m["security"] = map[string]any{"level": "safe", "network": true}
			m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{}}
		})
		if r := app.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
			t.Fatalf("register %s: %d %s", name, r.Status, r.Body)
		}
	}
	code, res = app.call(t, "admin", map[string]any{"tool": "fetch_away", "arguments": map[string]any{}})
	if res["success"] != false || errCode(res) != "UPSTREAM_ERROR" || !strings.Contains(string(mustJSON(res["error"])), otherOrigin) {
		t.Errorf("an http tool redirected elsewhere: %d %v", code, res)
	}
	code, res = app.call(t, "admin", map[string]any{"tool": "fetch_moved", "arguments": map[string]any{}})
	if res["success"] != true || !strings.Contains(string(mustJSON(res["data"])), "welcome home") {
		t.Errorf("an http tool redirected within its origin: %d %v", code, res)
	}
	// http_request: an agent's own header is a credential too; without
	// one the redirect is followed.
	code, res = app.call(t, "admin", map[string]any{"tool": "http_request", "arguments": map[string]any{"url": home.URL + "/away", "headers": map[string]any{"Private-Token": "agent-" + testSecret}}})
	if res["success"] != false || errCode(res) != "UPSTREAM_ERROR" {
		t.Errorf("http_request with a header, redirected elsewhere: %d %v", code, res)
	}
	code, res = app.call(t, "admin", map[string]any{"tool": "http_request", "arguments": map[string]any{"url": home.URL + "/away"}})
	if res["success"] != true {
		t.Errorf("http_request without credentials, redirected elsewhere: %d %v", code, res)
	}

	if got := elsewhere.holding(testSecret); len(got) > 0 {
		t.Errorf("the other port received the secret: %v", got)
	}
}
