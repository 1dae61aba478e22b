package identity

import (
	"net/netip"

	"toolbelt/services/netpolicy"
)

// Settings name the external OpenID provider (TOOLBELT_OIDC_*): the
// issuer whose JWT access tokens /mcp and /api/v1 accept and whose users
// may sign in to the console, the console's client at it, and how its
// people get roles. The zero value is no provider.
type Settings struct {
	// Issuer is the provider's issuer URL, exactly as in its tokens.
	Issuer string
	// ClientID and ClientSecret are the console's (confidential) client
	// at the provider, for single sign-on; empty: no console sign-in.
	ClientID, ClientSecret string
	// Roles map the person's groups to a role.
	Roles RoleMap
	// AllowPrivate are private address ranges the provider may be
	// reached at (an IdP on the internal network); only the provider's
	// requests may go there.
	AllowPrivate []netip.Prefix
}

// Enabled reports whether a provider is configured.
func (s Settings) Enabled() bool { return s.Issuer != "" }

// Policy is the outbound policy of requests to the provider (discovery,
// keys, token endpoint): public addresses, and its private ranges.
func (s Settings) Policy() netpolicy.Policy {
	return netpolicy.Policy{AllowPrivate: s.AllowPrivate}
}
