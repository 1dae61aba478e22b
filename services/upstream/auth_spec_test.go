package upstream

import (
	"context"
	"strings"
	"testing"

	"toolbelt/models"
)

// TestAuthSpecCheck: what a registration's auth may say, each refusal at
// its field with what to do.
func TestAuthSpecCheck(t *testing.T) {
	http := func(a *AuthSpec) Spec {
		return Spec{Name: "tracker", Transport: models.TransportHTTP, URL: "https://mcp.example.com/mcp", Category: "api", Auth: a}
	}
	for _, c := range []struct {
		spec Spec
		want string // "" accepted
	}{
		{http(&AuthSpec{Type: "oauth"}), ""},
		{http(&AuthSpec{Type: "oauth", Scopes: []string{"repo", "read:user"}, ClientID: "c", ClientSecret: "{{env.GH_SECRET}}"}), ""},
		{http(&AuthSpec{Type: "exchange", Audience: "https://mcp.example.com"}), ""},
		{http(&AuthSpec{Type: "basic"}), "/auth/type"},
		{http(&AuthSpec{Type: "oauth", Scopes: []string{"two words"}}), "/auth/scopes/0"},
		{http(&AuthSpec{Type: "oauth", ClientSecret: "{{env.GH_SECRET}}"}), "needs the client_id"},
		{http(&AuthSpec{Type: "oauth", ClientID: "c", ClientSecret: "hunter2-literal"}), "/auth/client_secret"},
		{http(&AuthSpec{Type: "oauth", Audience: "x"}), "/auth/audience"},
		{http(&AuthSpec{Type: "exchange"}), "/auth/audience"},
		{http(&AuthSpec{Type: "exchange", Audience: "x", ClientID: "c"}), "/auth/client_id"},
		{Spec{Name: "mem", Transport: models.TransportStdio, Command: []string{"true"}, Category: "api", Auth: &AuthSpec{Type: "oauth"}}, "{{user.secret.NAME}}"},
	} {
		err := c.spec.check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: refused: %v", c.spec.Auth, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want a refusal naming %q", c.spec.Auth, err, c.want)
		}
	}
}

// discoverer counts discoveries and fills what discovery would.
type discoverer struct{ n int }

func (d *discoverer) Discover(_ context.Context, u *models.Upstream) error {
	d.n++
	u.Auth.Registration, u.Auth.ClientID, u.AuthSecret = models.RegistrationDynamic, "dcr-client", []byte("sealed")
	return nil
}

// TestDiscoverKeepsWhatWasFound: an update that asks the same auth of
// the same URL keeps the client discovery registered (and so the
// connections people made with it); one that asks otherwise discovers
// again; a registration with auth and no discoverer is refused.
func TestDiscoverKeepsWhatWasFound(t *testing.T) {
	d := &discoverer{}
	m := &Manager{d: Deps{Auth: d}}
	ctx := context.Background()
	spec := Spec{Name: "tracker", Transport: models.TransportHTTP, URL: "https://mcp.example.com/mcp", Category: "api", Auth: &AuthSpec{Type: "oauth"}}
	cur := spec.upstream()
	if err := m.discover(ctx, cur, nil); err != nil || d.n != 1 || cur.Auth.ClientID != "dcr-client" {
		t.Fatalf("add: %v, %d discoveries, %+v", err, d.n, cur.Auth)
	}
	next := spec.upstream()
	next.Category = "search"
	if err := m.discover(ctx, next, cur); err != nil || d.n != 1 || next.Auth.ClientID != "dcr-client" || string(next.AuthSecret) != "sealed" {
		t.Fatalf("an unrelated change: %v, %d discoveries, %+v", err, d.n, next.Auth)
	}
	if !sameRegistration(cur, spec.upstream()) {
		t.Fatal("the same registration reads as changed")
	}
	spec.Auth.Scopes = []string{"repo"}
	next = spec.upstream()
	if err := m.discover(ctx, next, cur); err != nil || d.n != 2 {
		t.Fatalf("new scopes: %v, %d discoveries", err, d.n)
	}
	if err := (&Manager{}).discover(ctx, spec.upstream(), nil); err == nil {
		t.Fatal("auth without a discoverer was accepted")
	}
}
