package tooldef

import (
	"strings"
	"testing"
)

// {{user.secret.NAME}} is taken where {{env.NAME}} is, in headers, and
// refused in the URL and the body (which may be logged or echoed) and in
// any other spelling, with a message saying the form.
func TestUserSecretPlaceholders(t *testing.T) {
	def := func(url, body string, headers map[string]string) *Definition {
		d := &Definition{Name: "gh_issues", Version: "1.0.0", Description: "List the caller's GitHub issues.", Category: "api",
			Parameters: []byte(`{"type":"object","properties":{"q":{"type":"string"}}}`),
			Runner:     Runner{Kind: RunnerHTTP, Method: "GET", URL: url, Body: body, Headers: headers}}
		Normalize(d)
		return d
	}
	cases := []struct {
		name string
		def  *Definition
		want string // a problem's text; "" for none
	}{
		{"header", def("https://api.example.com/issues", "", map[string]string{"Authorization": "Bearer {{user.secret.GITHUB_TOKEN}}"}), ""},
		{"header beside an argument", def("https://api.example.com/issues", "", map[string]string{"X-Token": "{{ user.secret.T_1 }}", "X-Q": "{{q}}"}), ""},
		{"lower-case name", def("https://api.example.com/", "", map[string]string{"Authorization": "Bearer {{user.secret.github_token}}"}), "a person's own secret is {{user.secret.NAME}}"},
		{"another user field", def("https://api.example.com/", "", map[string]string{"Authorization": "{{user.name}}"}), "a person's own secret is {{user.secret.NAME}}"},
		{"name too long", def("https://api.example.com/", "", map[string]string{"Authorization": "{{user.secret.A" + strings.Repeat("B", 64) + "}}"}), "a person's own secret is {{user.secret.NAME}}"},
		{"in the URL", def("https://api.example.com/?key={{user.secret.KEY}}", "", nil), "fills a header only"},
		{"in the body", def("https://api.example.com/", `{"key":"{{user.secret.KEY}}"}`, nil), "fills a header only"},
		{"a credential header with no reference", def("https://api.example.com/", "", map[string]string{"Authorization": "{{q}}"}), "{{user.secret.NAME}}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ps := Validate(tc.def, nil)
			var got []string
			for _, p := range ps {
				got = append(got, p.Pointer+": "+p.Message)
			}
			all := strings.Join(got, "\n")
			if tc.want == "" && len(ps) > 0 {
				t.Fatalf("refused:\n%s", all)
			}
			if tc.want != "" && !strings.Contains(all, tc.want) {
				t.Fatalf("problems do not say %q:\n%s", tc.want, all)
			}
		})
	}
	if name, ok := UserSecret("user.secret.GITHUB_TOKEN"); !ok || name != "GITHUB_TOKEN" {
		t.Errorf("UserSecret = %q, %v", name, ok)
	}
	if _, ok := UserSecret("env.GITHUB_TOKEN"); ok {
		t.Error("env.GITHUB_TOKEN taken as a user secret")
	}
}
