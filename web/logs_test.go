package web_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestNoSecretInLogs drives requests full of secrets — API keys in headers,
// wrong keys, a console session, a configured secret and token-shaped
// values in arguments, tool output, errors and approvals — and checks that
// none of them reaches the server's log (read at debug level).
func TestNoSecretInLogs(t *testing.T) {
	app := newTestApp(t)
	dangerousWrite(t, app)
	github := "ghp_" + strings.Repeat("Zq7", 12) // a GitHub token shape gitleaks knows
	configured := "test-configured-secret"       // the test redactor's configured value
	wrong := "tb_" + strings.Repeat("5f", 32)    // a guessed key
	secrets := []string{app.keys["admin"], app.keys["agent"], app.keys["reviewer"], github, configured, wrong}

	text := "token " + github + " and " + configured
	app.call(t, "admin", map[string]any{"tool": "file_write", "session_id": "s", "arguments": map[string]any{"path": "secret.txt", "content": text}})
	app.call(t, "admin", map[string]any{"tool": "file_read", "session_id": "s", "arguments": map[string]any{"path": "secret.txt"}})
	app.call(t, "admin", map[string]any{"tool": "file_read", "session_id": "s", "arguments": map[string]any{"path": "../" + github}})
	app.call(t, "admin", map[string]any{"tool": "http_request", "session_id": "s", "arguments": map[string]any{"url": "http://127.0.0.1/?token=" + github}})
	app.call(t, "admin", map[string]any{"tool": "no_such_" + configured, "arguments": map[string]any{"x": github}})
	r := app.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "overwrite_note", "session_id": "s", "arguments": map[string]any{"path": "n", "content": text}})
	if r.Status != 202 {
		t.Fatalf("dangerous call: %d %s", r.Status, r.Body)
	}
	approval := r.JSON(t)["data"].(map[string]any)["approval_id"].(string)
	app.do(t, "reviewer", "GET", "/api/v1/approvals", nil)
	app.do(t, "reviewer", "POST", "/api/v1/approvals/"+approval+"/approve", map[string]any{"reason": "fine " + github})
	app.do(t, "admin", "POST", "/api/v1/tools/select", map[string]any{"query": "read " + github})
	app.do(t, "none", "GET", "/api/v1/me?key="+wrong, nil)
	app.keys["guesser"] = wrong
	for range 3 {
		app.do(t, "guesser", "GET", "/api/v1/me", nil)
	}
	// The console: a wrong key, then a session.
	b := newBrowserClient(t, app)
	b.get("/admin/login")
	b.post("/admin/login", url.Values{"key": {wrong}})
	b.post("/admin/login", url.Values{"key": {app.keys["admin"]}})
	b.get("/admin/calls")
	for _, c := range b.http.Jar.Cookies(mustURL(b.srv.URL + "/admin")) {
		secrets = append(secrets, c.Value)
	}
	app.invoker.Close(t.Context()) // every record written, every log line out

	logs := app.logs.String()
	if !strings.Contains(logs, `"request"`) || !strings.Contains(logs, "call") {
		t.Fatalf("the log is not being written: %.300s", logs)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(logs, s) {
			i := strings.Index(logs, s)
			t.Errorf("a secret is in the log: …%s…", logs[max(0, i-200):min(len(logs), i+len(s)+50)])
		}
	}
}

func mustURL(raw string) *url.URL {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	return u
}

// Every request leaves one access line naming it: its request id (the one
// answered in X-Request-ID), method, path, route, status and principal.
func TestAccessLogLine(t *testing.T) {
	app := newTestApp(t)
	r := app.do(t, "admin", "GET", "/api/v1/tools/file_read", nil)
	if r.Status != 200 {
		t.Fatalf("status %d", r.Status)
	}
	id := r.Header.Get("X-Request-ID")
	var line map[string]any
	for _, l := range strings.Split(app.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" && m["request_id"] == id {
			line = m
		}
	}
	want := map[string]any{"level": "INFO", "method": "GET", "path": "/api/v1/tools/file_read", "route": "/api/v1/tools/:name",
		"status": float64(200), "principal": "admin"}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("access line %s = %v, want %v (line %v)", k, line[k], v, line)
		}
	}
	// With its unit, as a person reads it ("1.5ms"), not bare nanoseconds.
	if raw, ok := line["duration"].(string); !ok {
		t.Errorf("access line duration = %v, want a duration with its unit", line["duration"])
	} else if d, err := time.ParseDuration(raw); err != nil || d <= 0 {
		t.Errorf("access line duration = %q (%v)", raw, err)
	}
}
