package authserver

import (
	"net/url"
	"slices"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"toolbelt/services/access"
	"toolbelt/services/clientdoc"
)

// ConsentPath is the console page a person allows or denies a client on
// (handlers/console/consent.go); op sends the browser there with the
// request's id.
const ConsentPath = "/admin/oauth/consent"

// Scopes are the scopes Toolbelt's tokens carry, besides openid and
// offline_access.
var Scopes = access.Scopes

// client is a public OAuth client (no secret: PKCE proves the code's
// requester), registered or described by its metadata document. Its
// redirect URIs are matched exactly, except a loopback one's port (RFC
// 8252 §7.3, op's native application rules).
type client struct {
	id, name  string
	redirects []string
	// doc is the client's validated metadata (it decides which redirect
	// URIs it allows); nil for a registered client (RFC 7591), whose
	// metadata was validated the same way when it registered.
	doc *clientdoc.Client
}

// allowsRedirect says uri is one of the client's redirect URIs (a
// loopback one on any port).
func (c *client) allowsRedirect(uri string) bool {
	d := c.doc
	if d == nil {
		d = &clientdoc.Client{RedirectURIs: c.redirects}
	}
	return d.AllowsRedirect(uri)
}

var _ op.Client = (*client)(nil)

func (c *client) GetID() string                       { return c.id }
func (c *client) RedirectURIs() []string              { return c.redirects }
func (c *client) PostLogoutRedirectURIs() []string    { return nil }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeNative }
func (c *client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodNone }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) LoginURL(id string) string            { return ConsentPath + "?id=" + url.QueryEscape(id) }
func (c *client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (c *client) IDTokenLifetime() time.Duration       { return AccessTokenTTL }
func (c *client) DevMode() bool                        { return false }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *client) ClockSkew() time.Duration             { return 0 }
func (c *client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) IsScopeAllowed(scope string) bool { return slices.Contains(Scopes, scope) }

// redirectHost is the host a client's redirect URI names, for the consent
// page.
func redirectHost(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return uri
	}
	return u.Host
}
