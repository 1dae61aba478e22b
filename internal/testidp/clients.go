package testidp

import (
	"slices"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// HelperRedirectURI is registered on every client: AccessToken uses it
// and stops at the redirect, so nothing needs to listen there.
const HelperRedirectURI = "http://127.0.0.1/testidp-callback"

// Client is an OAuth client registered at the provider.
type Client struct {
	ID string
	// Secret makes a confidential client (client_secret_basic or _post);
	// empty makes a public one (PKCE only).
	Secret       string
	RedirectURIs []string // HelperRedirectURI is added
	// Resource, when set, makes the client's access tokens JWTs whose aud
	// is Resource (e.g. Toolbelt's "<public>/mcp"), carrying scope,
	// groups, email, name and preferred_username claims. Otherwise access
	// tokens are opaque and aud is the client ID (a console SSO client).
	Resource string
	// ScopesAsArray writes a JWT access token's scopes as an "scp" array
	// (Entra, Okta) rather than a space-separated "scope" string.
	ScopesAsArray bool
	// ExchangeFrom and ExchangeTo let a confidential client use the token
	// exchange grant (RFC 8693, exchange.go): it may present a person's
	// access token issued for one of ExchangeFrom (Toolbelt's resources)
	// and get a JWT access token for one of ExchangeTo (the upstream
	// servers' audiences). A client with ExchangeTo gets JWT access tokens
	// whatever the grant.
	ExchangeFrom, ExchangeTo []string
}

// AddClient registers a client (replacing one with the same ID).
func (idp *IDP) AddClient(c Client) {
	c.RedirectURIs = append(append([]string{}, c.RedirectURIs...), HelperRedirectURI)
	c.ExchangeFrom, c.ExchangeTo = slices.Clone(c.ExchangeFrom), slices.Clone(c.ExchangeTo)
	idp.mu.Lock()
	defer idp.mu.Unlock()
	idp.clients[c.ID] = &c
}

// opClient is a Client as the provider sees it.
type opClient struct{ c *Client }

var _ op.Client = opClient{}

func (o opClient) GetID() string                    { return o.c.ID }
func (o opClient) RedirectURIs() []string           { return o.c.RedirectURIs }
func (o opClient) PostLogoutRedirectURIs() []string { return nil }

func (o opClient) ApplicationType() op.ApplicationType {
	if o.c.Secret == "" {
		return op.ApplicationTypeNative
	}
	return op.ApplicationTypeWeb
}

func (o opClient) AuthMethod() oidc.AuthMethod {
	if o.c.Secret == "" {
		return oidc.AuthMethodNone
	}
	return oidc.AuthMethodBasic
}

func (o opClient) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}

func (o opClient) GrantTypes() []oidc.GrantType {
	if len(o.c.ExchangeTo) > 0 {
		return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken, oidc.GrantTypeTokenExchange}
	}
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}

func (o opClient) LoginURL(authRequestID string) string {
	return loginPath + "?authRequestID=" + authRequestID
}

func (o opClient) AccessTokenType() op.AccessTokenType {
	if o.c.Resource != "" || len(o.c.ExchangeTo) > 0 {
		return op.AccessTokenTypeJWT
	}
	return op.AccessTokenTypeBearer
}

func (o opClient) IDTokenLifetime() time.Duration { return time.Hour }

// DevMode lets loopback http redirect URIs through: every test client
// lives on loopback.
func (o opClient) DevMode() bool { return true }

func (o opClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

func (o opClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// IsScopeAllowed allows any scope: the tests decide what they ask for,
// and Toolbelt, not the IdP, is what must refuse what a role may not hold.
func (o opClient) IsScopeAllowed(string) bool { return true }

// IDTokenUserinfoClaimsAssertion puts email and profile claims in the ID
// token, as most IdPs do, so an SSO login needs no userinfo call.
func (o opClient) IDTokenUserinfoClaimsAssertion() bool { return true }

func (o opClient) ClockSkew() time.Duration { return 0 }
