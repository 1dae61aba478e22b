package app

import (
	"toolbelt/services/identity"
)

// ssoCallbackPath is the console's callback at the identity provider:
// register PublicURL + ssoCallbackPath as the client's redirect URI.
const ssoCallbackPath = "/admin/login/oidc/callback"

// sso is the console's relying party at the organisation's identity
// provider, nil when none is configured (TOOLBELT_OIDC_ISSUER and
// _CLIENT_ID). It reaches the provider under the provider's outbound
// policy (public addresses, and TOOLBELT_OIDC_ALLOW_PRIVATE), and maps
// people to principals with the People buildOIDC made (the same as the
// provider's access tokens).
func (a *App) sso() *identity.SSO {
	o := a.Config.OIDC
	if a.People == nil || o.ClientID == "" {
		return nil
	}
	return identity.NewSSO(identity.SSODeps{
		Config: identity.SSOConfig{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
			Name: a.Config.OIDCName, RedirectURL: a.PublicURL + ssoCallbackPath, HTTP: o.Policy().Client()},
		Store: a.Store, People: a.People, Accounts: a.Accounts, Log: a.Log})
}
