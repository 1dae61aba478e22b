package clientdoc

import (
	"errors"
	"strings"
	"testing"

	"toolbelt/models"
)

func TestParseRegistration(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 2001)
	cases := []struct {
		name string
		body string
		want string // "" for a valid request
	}{
		{"minimal", `{"redirect_uris":["http://127.0.0.1/cb"]}`, ""},
		{"full public client", `{"client_name":"Claude","client_uri":"https://claude.ai","logo_uri":"https://claude.ai/logo.png",
			"redirect_uris":["https://claude.ai/api/mcp/auth_callback","http://[::1]:7777/cb"],
			"grant_types":["authorization_code","refresh_token"],"response_types":["code"],
			"token_endpoint_auth_method":"none","scope":"tools:read tools:call","software_id":"x","jwks":{"keys":[]}}`, ""},
		{"private-use scheme", `{"redirect_uris":["com.example.agent:/oauth/cb"]}`, ""},
		{"an IDE's scheme", `{"redirect_uris":["cursor://anysphere.cursor-mcp/oauth/callback"]}`, ""},
		{"localhost listener", `{"redirect_uris":["http://localhost:6274/oauth/callback"]}`, ""},
		{"query in redirect URI", `{"redirect_uris":["https://app.example/cb?tenant=1"]}`, ""},

		{"client_secret_basic", `{"redirect_uris":["https://app.example/cb"],"token_endpoint_auth_method":"client_secret_basic"}`,
			`token_endpoint_auth_method "client_secret_basic" is not supported: Toolbelt registers public clients only`},
		{"client_secret_post", `{"redirect_uris":["https://app.example/cb"],"token_endpoint_auth_method":"client_secret_post"}`,
			`"client_secret_post" is not supported`},
		{"private_key_jwt", `{"redirect_uris":["https://app.example/cb"],"token_endpoint_auth_method":"private_key_jwt"}`,
			`"private_key_jwt" is not supported`},
		{"implicit grant", `{"redirect_uris":["https://app.example/cb"],"grant_types":["implicit"]}`,
			`grant_types: "implicit" is not supported`},
		{"password grant", `{"redirect_uris":["https://app.example/cb"],"grant_types":["authorization_code","password"]}`,
			`grant_types: "password" is not supported`},
		{"client credentials", `{"redirect_uris":["https://app.example/cb"],"grant_types":["client_credentials"]}`,
			`"client_credentials" is not supported`},
		{"refresh only", `{"redirect_uris":["https://app.example/cb"],"grant_types":["refresh_token"]}`,
			"grant_types must include authorization_code"},
		{"implicit response", `{"redirect_uris":["https://app.example/cb"],"response_types":["code","token"]}`,
			`response_types: "token" is not supported`},
		{"missing redirect_uris", `{"client_name":"x"}`, "redirect_uris is required"},
		{"empty redirect_uris", `{"redirect_uris":[]}`, "redirect_uris is required"},
		{"javascript URI", `{"redirect_uris":["javascript:alert(1)"]}`, `scheme "javascript", which is not allowed`},
		{"data URI", `{"redirect_uris":["data:text/html,<script>alert(1)</script>"]}`, "not allowed"},
		{"file URI", `{"redirect_uris":["file:///etc/passwd"]}`, `scheme "file", which is not allowed`},
		{"fragment", `{"redirect_uris":["https://app.example/cb#frag"]}`, "has a fragment"},
		{"empty fragment", `{"redirect_uris":["https://app.example/cb#"]}`, "has a fragment"},
		{"relative", `{"redirect_uris":["/cb"]}`, "is not absolute"},
		{"http remote", `{"redirect_uris":["http://app.example/cb"]}`, "uses http on a host that is not loopback"},
		{"http on a localhost subdomain", `{"redirect_uris":["http://evil.localhost:8080/cb"]}`, "uses http on a host that is not loopback"},
		{"about URI", `{"redirect_uris":["about:blank"]}`, `scheme "about", which is not allowed`},
		{"websocket URI", `{"redirect_uris":["wss://app.example/cb"]}`, `scheme "wss", which is not allowed`},
		{"credentials", `{"redirect_uris":["https://user:pw@app.example/cb"]}`, "carries credentials"},
		{"https without host", `{"redirect_uris":["https:/cb"]}`, "names no host"},
		{"space", `{"redirect_uris":["https://app.example/c b"]}`, "holds a space"},
		{"second URI bad", `{"redirect_uris":["https://app.example/cb","javascript:x"]}`, "redirect_uris[1]"},
		{"too many URIs", `{"redirect_uris":[` + strings.Repeat(`"https://a.example/cb",`, 20) + `"https://a.example/cb"]}`, "list at most 20"},
		{"oversized URI", `{"redirect_uris":["https://app.example/` + long + `"]}`, "longer than 2000 bytes"},
		{"oversized name", `{"redirect_uris":["https://app.example/cb"],"client_name":"` + strings.Repeat("n", 101) + `"}`,
			"client_name is longer than 100 characters"},
		{"bidi override in name", `{"redirect_uris":["https://app.example/cb"],"client_name":"Good\u202eevil"}`,
			"client_name holds the control or formatting character U+202E"},
		{"oversized scope", `{"redirect_uris":["https://app.example/cb"],"scope":"` + strings.Repeat("s", 1001) + `"}`,
			"scope is longer than 1000 bytes"},
		{"bad scope", `{"redirect_uris":["https://app.example/cb"],"scope":"tools:read \"x\""}`, "scope holds a character"},
		{"http client_uri", `{"redirect_uris":["https://app.example/cb"],"client_uri":"http://app.example"}`,
			"client_uri \"http://app.example\" must be an https URL"},
		{"javascript logo", `{"redirect_uris":["https://app.example/cb"],"logo_uri":"javascript:alert(1)"}`,
			"logo_uri \"javascript:alert(1)\" must be an https URL"},
		{"wrong type", `{"redirect_uris":"https://app.example/cb"}`, "member redirect_uris must be an array of strings"},
		{"name not a string", `{"redirect_uris":["https://app.example/cb"],"client_name":7}`, "member client_name must be a string"},
		{"array body", `[]`, "must be a JSON object"},
		{"not JSON", `redirect_uris=https://app.example/cb`, "is not valid JSON"},
		{"trailing data", `{"redirect_uris":["https://app.example/cb"]} {}`, "is not valid JSON"},
		{"oversized body", `{"redirect_uris":["https://app.example/cb"],"x":"` + strings.Repeat("x", DefaultMaxBytes) + `"}`,
			"larger than 5120 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := ParseRegistration([]byte(tc.body))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.ID != "" || c.FromDocument || c.AuthMethod != "none" || c.Name == "" ||
					len(c.GrantTypes) == 0 || c.ResponseTypes[0] != "code" {
					t.Fatalf("client = %+v", c)
				}
				return
			}
			if err == nil {
				t.Fatalf("registered %+v; want an error saying %q", c, tc.want)
			}
			if !errors.Is(err, models.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q: want models.ErrInvalid saying %q", err, tc.want)
			}
			// RFC 7591's invalid_redirect_uri: the refusals of redirect_uris' values.
			if redirect := strings.Contains(err.Error(), "client registration: redirect_uris"); errors.Is(err, ErrRedirectURI) != redirect {
				t.Fatalf("error %q: errors.Is(ErrRedirectURI) = %v, want %v", err, !redirect, redirect)
			}
		})
	}
}

// TestParseRegistrationDefaults: RFC 7591's defaults, except the auth
// method, which is "none" since Toolbelt has no other.
func TestParseRegistrationDefaults(t *testing.T) {
	t.Parallel()
	c, err := ParseRegistration([]byte(`{"redirect_uris":["http://127.0.0.1:9/cb"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.GrantTypes, ",") != "authorization_code" || strings.Join(c.ResponseTypes, ",") != "code" ||
		c.AuthMethod != "none" || c.Name != "127.0.0.1" {
		t.Fatalf("client = %+v", c)
	}
}

func TestAllowsRedirect(t *testing.T) {
	t.Parallel()
	c := &Client{RedirectURIs: []string{"https://app.example/cb", "http://127.0.0.1/callback", "http://[::1]:8080/cb?x=1", "com.example.app:/cb",
		"http://localhost:6274/oauth/callback", "cursor://anysphere.cursor-mcp/oauth/callback"}}
	cases := map[string]bool{
		"https://app.example/cb":                       true,
		"com.example.app:/cb":                          true,
		"http://127.0.0.1/callback":                    true,
		"http://127.0.0.1:53124/callback":              true, // RFC 8252 §7.3: any port
		"http://[::1]:1/cb?x=1":                        true,
		"http://[::1]/cb?x=1":                          true,
		"https://app.example/cb/":                      false,
		"https://app.example/cb?x=1":                   false,
		"https://app.example:8443/cb":                  false, // the port exception is loopback http's only
		"https://APP.example/cb":                       false,
		"https://evil.example/cb":                      false,
		"http://localhost:53124/callback":              false,
		"http://127.0.0.1:53124/callback#x":            false,
		"http://127.0.0.1:53124/callback2":             false,
		"http://127.0.0.1:53124/callback?a=b":          false,
		"http://127.0.0.1:0/callback":                  false,
		"http://127.0.0.1:053124/callback":             false,
		"http://u@127.0.0.1:53124/callback":            false,
		"https://127.0.0.1:53124/callback":             false,
		"http://[::1]:1/callback":                      false, // registered on 127.0.0.1, not [::1]
		"http://127.0.0.2:53124/callback":              false,
		"http://[::1]:1/cb":                            false,
		"com.example.app:/cb2":                         false,
		"http://localhost:33418/oauth/callback":        true, // MCP hosts' loopback listener, any port
		"http://localhost:33418/oauth/callback/x":      false,
		"http://127.0.0.1:6274/oauth/callback":         false, // registered on localhost, not 127.0.0.1
		"cursor://anysphere.cursor-mcp/oauth/callback": true,
		"cursor://evil.example/oauth/callback":         false,
		"":                                             false,
	}
	for uri, want := range cases {
		if got := c.AllowsRedirect(uri); got != want {
			t.Errorf("AllowsRedirect(%q) = %v, want %v", uri, got, want)
		}
	}
}
