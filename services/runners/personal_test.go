package runners

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"toolbelt/models"
	"toolbelt/services/netpolicy"
	"toolbelt/services/tooldef"
)

// secretsOf is a PersonalSecrets over a map: principal → name → value.
type secretsOf map[uint]map[string]string

func (s secretsOf) PersonalSecret(_ context.Context, principal uint, name string) (string, error) {
	if v, ok := s[principal][name]; ok {
		return v, nil
	}
	return "", models.ErrNotFound.Errorf("secret credential %q", name)
}

// An http tool sends the caller's own {{user.secret.NAME}}, never
// another's; an upstream that echoes it back (as written, in JSON, in
// base64, in a header) hands none of it to the answer; a caller with
// none stored, or no caller, gets UPSTREAM_NOT_CONNECTED with the page
// to store it.
func TestHTTPRunnerSendsTheCallersOwnSecret(t *testing.T) {
	const aliceValue, bobValue, short = "alice-ghp-0123456789abcdef", "bob-ghp-fedcba9876543210", "s3"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("X-Echo", got)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"you_sent": got, "b64": base64.StdEncoding.EncodeToString([]byte(got)), "short": r.Header.Get("X-Short")})
	}))
	defer echo.Close()
	table := NewTable(Deps{Net: netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}},
		PersonalSecrets: secretsOf{1: {"GITHUB_TOKEN": aliceValue, "SHORT": short}, 2: {"GITHUB_TOKEN": bobValue, "SHORT": short}},
		PublicURL:       "https://toolbelt.example/", Log: slog.New(slog.DiscardHandler)})
	def := tooldef.Definition{Name: "gh", Runner: tooldef.Runner{Kind: tooldef.RunnerHTTP, Method: "GET", URL: echo.URL,
		Headers: map[string]string{"Authorization": "Bearer {{user.secret.GITHUB_TOKEN}}", "X-Short": "{{user.secret.SHORT}}"}}}
	call := func(p *models.Principal) (string, error) {
		data, err := table.Run(context.Background(), &Call{Def: def, Args: map[string]any{}, Principal: p, Log: slog.New(slog.DiscardHandler)})
		raw, _ := json.Marshal(data)
		return string(raw), err
	}
	for _, c := range []struct {
		who        *models.Principal
		own, other string
	}{{&models.Principal{ID: 1, Name: "alice"}, aliceValue, bobValue}, {&models.Principal{ID: 2, Name: "bob"}, bobValue, aliceValue}} {
		out, err := call(c.who)
		if err != nil {
			t.Fatalf("%s: %v", c.who.Name, err)
		}
		for _, leak := range []string{c.own, c.other, base64.StdEncoding.EncodeToString([]byte(c.own)), `"short":"s3"`} {
			if strings.Contains(out, leak) {
				t.Errorf("%s's answer holds %q:\n%s", c.who.Name, leak, out)
			}
		}
		if !strings.Contains(out, personalMark) || !strings.Contains(out, `"status":200`) {
			t.Errorf("%s's answer: %s", c.who.Name, out)
		}
	}
	for _, who := range []*models.Principal{{ID: 3, Name: "carol"}, nil} {
		_, err := call(who)
		var te *Error
		if !errors.As(err, &te) || te.Code != models.CodeUpstreamNotConnected || te.ConnectURL != "https://toolbelt.example/admin/secrets?name=GITHUB_TOKEN" &&
			te.ConnectURL != "https://toolbelt.example/admin/secrets?name=SHORT" {
			t.Errorf("no secret stored (%v): %#v", who, err)
		}
	}
}
