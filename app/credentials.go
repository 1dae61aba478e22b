package app

import (
	"context"

	"toolbelt/models"
	"toolbelt/services/connect"
	"toolbelt/services/runners"
	"toolbelt/services/upstream"
)

// byAuthType hands out the token of the person a call acts for at an
// upstream by the upstream's auth type: their connected account's
// (oauth), or one the organisation's provider mints from the token they
// brought (exchange).
type byAuthType struct {
	oauth    *connect.Service
	exchange *connect.Exchanger
}

func (b byAuthType) Token(ctx context.Context, u *models.Upstream, c *runners.Call) (string, error) {
	if u.Auth != nil && u.Auth.Type == models.UpstreamAuthExchange {
		return b.exchange.Token(ctx, u, c)
	}
	return b.oauth.Token(ctx, u, c)
}

// canExchange: the organisation's OpenID provider can mint upstream
// tokens, as the confidential client Toolbelt is there (RFC 8693).
func (cfg Config) canExchange() bool {
	return cfg.OAuth == OAuthOIDC && cfg.OIDC.ClientID != "" && cfg.OIDC.ClientSecret != ""
}

// credentials are the upstream tokens of the people calls act for.
func (a *App) credentials() upstream.Credentials {
	cfg := a.Config
	if !cfg.canExchange() {
		return a.Connect
	}
	return byAuthType{oauth: a.Connect, exchange: connect.NewExchanger(connect.ExchangerDeps{Issuer: cfg.OIDC.Issuer,
		ClientID: cfg.OIDC.ClientID, ClientSecret: cfg.OIDC.ClientSecret, Client: cfg.OIDC.Policy().Client(), Log: a.Log})}
}
