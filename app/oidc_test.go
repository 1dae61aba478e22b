package app

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"toolbelt/services/identity"
)

// TestOIDCSettings reads the provider's settings and refuses, naming the
// fix, every half or wrong configuration.
func TestOIDCSettings(t *testing.T) {
	t.Parallel()
	parse := func(env map[string]string) (identity.Settings, error) {
		cfg, err := ParseConfig(nil, lookupIn(env))
		return cfg.OIDC, err
	}
	s, err := parse(nil)
	if err != nil || s.Enabled() {
		t.Fatalf("unset: %+v, %v", s, err)
	}
	s, err = parse(map[string]string{
		"TOOLBELT_OIDC_ISSUER": "https://login.example.com/realms/main", "TOOLBELT_OIDC_CLIENT_ID": "toolbelt",
		"TOOLBELT_OIDC_CLIENT_SECRET": "s3cret-s3cret", "TOOLBELT_OIDC_ROLE_CLAIM": "roles",
		"TOOLBELT_OIDC_ADMIN_GROUPS": " ops , platform", "TOOLBELT_OIDC_AGENT_GROUPS": "bots",
		"TOOLBELT_OIDC_ALLOW_PRIVATE": "10.20.0.1/16",
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Issuer != "https://login.example.com/realms/main" || s.ClientID != "toolbelt" || s.Roles.Claim != "roles" ||
		!slices.Equal(s.Roles.Admin, []string{"ops", "platform"}) || s.Roles.Reviewer != nil || !slices.Equal(s.Roles.Agent, []string{"bots"}) ||
		!slices.Equal(s.AllowPrivate, []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}) {
		t.Errorf("settings %+v", s)
	}
	cfg, _ := ParseConfig(nil, lookupIn(map[string]string{"TOOLBELT_OIDC_ISSUER": "https://idp.example.com",
		"TOOLBELT_OIDC_CLIENT_ID": "c", "TOOLBELT_OIDC_CLIENT_SECRET": "the-client-secret", "TOOLBELT_OIDC_AGENT_GROUPS": "a"}))
	if !slices.Contains(secretValues(cfg), "the-client-secret") {
		t.Error("the client secret is not redacted")
	}
	if s, err := parse(map[string]string{"TOOLBELT_OIDC_ISSUER": "http://127.0.0.1:9000", "TOOLBELT_OIDC_AGENT_GROUPS": "a",
		"TOOLBELT_OIDC_ALLOW_PRIVATE": "127.0.0.1/32"}); err != nil || s.Roles.Claim != identity.DefaultRoleClaim {
		t.Errorf("loopback issuer allowed by configuration: %+v, %v", s, err)
	}

	ok := map[string]string{"TOOLBELT_OIDC_ISSUER": "https://idp.example.com", "TOOLBELT_OIDC_AGENT_GROUPS": "bots"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for k, v := range ok {
			m[k] = v
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, c := range []struct {
		env  map[string]string
		says string
	}{
		{map[string]string{"TOOLBELT_OIDC_AGENT_GROUPS": "bots"}, "TOOLBELT_OIDC_AGENT_GROUPS is set but TOOLBELT_OIDC_ISSUER is not"},
		{map[string]string{"TOOLBELT_OIDC_CLIENT_SECRET": "x"}, "TOOLBELT_OIDC_CLIENT_SECRET is set but TOOLBELT_OIDC_ISSUER is not"},
		{with("TOOLBELT_OIDC_ISSUER", "idp.example.com"), "use the provider's issuer URL"},
		{with("TOOLBELT_OIDC_ISSUER", "https://idp.example.com/?x=1"), "use the provider's issuer URL"},
		{with("TOOLBELT_OIDC_ISSUER", "http://idp.example.com"), "use https"},
		{with("TOOLBELT_OIDC_ISSUER", "http://127.0.0.1:9000"), "TOOLBELT_OIDC_ALLOW_PRIVATE=127.0.0.1/32"},
		{with("TOOLBELT_OIDC_ISSUER", "http://localhost:9000"), "TOOLBELT_OIDC_ALLOW_PRIVATE=127.0.0.1/32"},
		{with("TOOLBELT_OIDC_ISSUER", "https://10.1.2.3"), "TOOLBELT_OIDC_ALLOW_PRIVATE=10.1.2.3/32"},
		{with("TOOLBELT_OIDC_AGENT_GROUPS", ""), "no group maps to a role"},
		{with("TOOLBELT_OIDC_CLIENT_SECRET", "x"), "TOOLBELT_OIDC_CLIENT_ID is not"},
		{with("TOOLBELT_OIDC_ROLE_CLAIM", "my groups"), "TOOLBELT_OIDC_ROLE_CLAIM"},
		{with("TOOLBELT_OIDC_ALLOW_PRIVATE", "10.0.0.0"), "not a CIDR range"},
		{map[string]string{"TOOLBELT_OAUTH": "oidc"}, "TOOLBELT_OAUTH=oidc needs TOOLBELT_OIDC_ISSUER"},
	} {
		if _, err := parse(c.env); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v: %v, want an error saying %q", c.env, err, c.says)
		}
	}
}
