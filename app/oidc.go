package app

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strings"

	"toolbelt/services/identity"
)

// claimName is what TOOLBELT_OIDC_ROLE_CLAIM may be: a JSON member name
// without spaces or separators.
var claimName = regexp.MustCompile(`^[A-Za-z0-9_.:/-]{1,128}$`)

// oidcSettings reads the external OpenID provider's settings
// (TOOLBELT_OIDC_*). With no issuer every other one must be unset too:
// half a configuration is a mistake, not a choice.
func oidcSettings(env func(name, def string) string) (identity.Settings, error) {
	s := identity.Settings{
		Issuer:       strings.TrimSpace(env("TOOLBELT_OIDC_ISSUER", "")),
		ClientID:     strings.TrimSpace(env("TOOLBELT_OIDC_CLIENT_ID", "")),
		ClientSecret: env("TOOLBELT_OIDC_CLIENT_SECRET", ""),
		Roles: identity.RoleMap{
			Claim:    strings.TrimSpace(env("TOOLBELT_OIDC_ROLE_CLAIM", identity.DefaultRoleClaim)),
			Admin:    list(env("TOOLBELT_OIDC_ADMIN_GROUPS", "")),
			Reviewer: list(env("TOOLBELT_OIDC_REVIEWER_GROUPS", "")),
			Agent:    list(env("TOOLBELT_OIDC_AGENT_GROUPS", "")),
		},
	}
	private := env("TOOLBELT_OIDC_ALLOW_PRIVATE", "")
	if s.Issuer == "" {
		for _, name := range []string{"TOOLBELT_OIDC_CLIENT_ID", "TOOLBELT_OIDC_CLIENT_SECRET", "TOOLBELT_OIDC_ADMIN_GROUPS",
			"TOOLBELT_OIDC_REVIEWER_GROUPS", "TOOLBELT_OIDC_AGENT_GROUPS", "TOOLBELT_OIDC_ALLOW_PRIVATE"} {
			if env(name, "") != "" {
				return s, fmt.Errorf("%s is set but TOOLBELT_OIDC_ISSUER is not; set the issuer URL of your OpenID provider, or unset %s", name, name)
			}
		}
		return identity.Settings{}, nil
	}
	u, err := url.Parse(s.Issuer)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return s, fmt.Errorf("TOOLBELT_OIDC_ISSUER %q: use the provider's issuer URL as its tokens' iss says, such as https://login.example.com/realms/main", s.Issuer)
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return s, fmt.Errorf("TOOLBELT_OIDC_ISSUER %q: use https (plain http only for a provider on this machine's loopback)", s.Issuer)
	}
	if s.ClientSecret != "" && s.ClientID == "" {
		return s, fmt.Errorf("TOOLBELT_OIDC_CLIENT_SECRET is set but TOOLBELT_OIDC_CLIENT_ID is not; set the console's client id at the provider")
	}
	if !claimName.MatchString(s.Roles.Claim) {
		return s, fmt.Errorf("TOOLBELT_OIDC_ROLE_CLAIM %q: name the claim that lists a person's groups, such as groups or roles", s.Roles.Claim)
	}
	if len(s.Roles.Admin)+len(s.Roles.Reviewer)+len(s.Roles.Agent) == 0 {
		return s, fmt.Errorf("TOOLBELT_OIDC_ISSUER is set but no group maps to a role, so nobody could sign in; set TOOLBELT_OIDC_ADMIN_GROUPS, TOOLBELT_OIDC_REVIEWER_GROUPS or TOOLBELT_OIDC_AGENT_GROUPS (comma-separated values of the %q claim)", s.Roles.Claim)
	}
	for _, c := range list(private) {
		pfx, err := netip.ParsePrefix(c)
		if err != nil {
			return s, fmt.Errorf("TOOLBELT_OIDC_ALLOW_PRIVATE: %q is not a CIDR range such as 10.0.0.0/8 or 127.0.0.1/32", c)
		}
		s.AllowPrivate = append(s.AllowPrivate, pfx.Masked())
	}
	host := u.Hostname()
	if host == "localhost" {
		host = "127.0.0.1"
	}
	if ip, err := netip.ParseAddr(host); err == nil && !s.Policy().AddrAllowed(ip) {
		return s, fmt.Errorf("TOOLBELT_OIDC_ISSUER %q is at the private address %s; allow it with TOOLBELT_OIDC_ALLOW_PRIVATE=%s", s.Issuer, ip, netip.PrefixFrom(ip, ip.BitLen()))
	}
	return s, nil
}

// list splits a comma-separated setting, dropping blanks.
func list(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// buildOIDC makes the people of the external OpenID provider and, unless
// TOOLBELT_OAUTH=off, accepts its JWT access tokens at /mcp and /api/v1
// and lists it as an authorization server of both. Its discovery and keys
// are fetched at the first token, through its outbound policy.
func (a *App) buildOIDC() {
	s := a.Config.OIDC
	if !s.Enabled() {
		return
	}
	a.People = identity.NewPeople(identity.PeopleDeps{Store: a.Store, Accounts: a.Accounts, Roles: s.Roles, Log: a.Log})
	if a.Config.OAuth == OAuthOff {
		return
	}
	a.tokens = append(a.tokens, identity.NewJWTVerifier(identity.JWTVerifierDeps{Issuer: s.Issuer, People: a.People,
		Accounts: a.Accounts, Client: s.Policy().Client(), Log: a.Log}))
	a.authServers = append(a.authServers, s.Issuer)
}
