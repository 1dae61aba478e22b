package tooldef

import "testing"

// TestCallerFree: only an http tool filled from its arguments and the
// server's secrets shares its results across callers; every other runner
// kind, and a template naming anything else, is per principal and session.
func TestCallerFree(t *testing.T) {
	httpTool := func(url, body string, headers map[string]string) Definition {
		return Definition{Runner: Runner{Kind: RunnerHTTP, Method: "GET", URL: url, Body: body, Headers: headers}}
	}
	cases := []struct {
		name string
		def  Definition
		want bool
	}{
		{"http, fixed URL", httpTool("https://api.example.com/status", "", nil), true},
		{"http, arguments in URL and body", httpTool("https://api.example.com/{{city}}?units={{units}}", `{"q":{{q}}}`, nil), true},
		{"http, argument header", httpTool("https://api.example.com/", "", map[string]string{"Accept-Language": "{{lang}}"}), true},
		{"http, server secret header", httpTool("https://api.example.com/", "", map[string]string{"Authorization": "Bearer {{env.API_TOKEN}}"}), true},
		{"http, dotted header placeholder", httpTool("https://api.example.com/", "", map[string]string{"Authorization": "Bearer {{caller.token}}"}), false},
		{"http, lower-case env header", httpTool("https://api.example.com/", "", map[string]string{"X-Key": "{{env.key}}"}), false},
		{"http, secret in the URL", httpTool("https://api.example.com/?key={{env.API_TOKEN}}", "", nil), false},
		{"http, secret in the body", httpTool("https://api.example.com/", `{"key":"{{env.API_TOKEN}}"}`, nil), false},
		{"http, the caller's own secret header", httpTool("https://api.example.com/", "", map[string]string{"Authorization": "Bearer {{user.secret.GITHUB_TOKEN}}"}), false},
		{"http, session in the URL", httpTool("https://api.example.com/{{session.id}}", "", nil), false},
		{"builtin file_read", Definition{Category: "filesystem", Runner: Runner{Kind: RunnerBuiltin, Builtin: "file_read"}}, false},
		{"builtin http_request", Definition{Category: "api", Runner: Runner{Kind: RunnerBuiltin, Builtin: "http_request"}}, false},
		{"builtin web_search", Definition{Category: "search", Runner: Runner{Kind: RunnerBuiltin, Builtin: "web_search"}}, false},
		{"command in category shell", Definition{Category: "shell", Runner: Runner{Kind: RunnerCommand, Argv: []string{"cat", "--", "{{path}}"}}}, false},
		{"command in category api", Definition{Category: "api", Runner: Runner{Kind: RunnerCommand, Argv: []string{"date"}}}, false},
		{"composite", Definition{Category: "api", Runner: Runner{Kind: RunnerComposite, Steps: []CompositeStep{{Tool: "weather"}}}}, false},
		{"mcp", Definition{Category: "api", Runner: Runner{Kind: RunnerMCP, Server: "s", Tool: "t"}}, false},
		{"no runner kind", Definition{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := CallerFree(tc.def); got != tc.want {
				t.Errorf("CallerFree = %v, want %v", got, tc.want)
			}
		})
	}
}
