package upstream

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"toolbelt/models"
)

// AuthSpec is how an admin asks callers of a remote server to reach it as
// the person they act for (Spec.Auth). Everything else an UpstreamAuth
// holds (the server's resource, its authorization server's endpoints, the
// client Toolbelt registered) is found by discovery at registration.
type AuthSpec struct {
	// Type is oauth (each person connects their account at the server's
	// authorization server) or exchange (the organisation's identity
	// provider mints a token for the server from the person's own token,
	// RFC 8693; needs TOOLBELT_OAUTH=oidc).
	Type string `json:"type" example:"oauth" enums:"oauth,exchange"`
	// Scopes are those asked for (none: the server's advertised ones).
	Scopes []string `json:"scopes,omitempty" example:"repo,read:user"`
	// ClientID and ClientSecret are a client an admin registered for
	// Toolbelt at the authorization server (oauth; optional: without
	// them Toolbelt registers itself). The secret is a reference to a
	// configured secret, {{env.NAME}}, never the value.
	ClientID     string `json:"client_id,omitempty"`
	ClientSecret string `json:"client_secret,omitempty" example:"{{env.GITHUB_CLIENT_SECRET}}"`
	// Audience is what a token exchange asks a token for (exchange).
	Audience string `json:"audience,omitempty" example:"https://mcp.example.com"`
}

// Discoverer fills in what an upstream's auth needs from the server and
// its authorization server (implemented by *connect.Service): the
// resource, the endpoints, Toolbelt's client there.
type Discoverer interface {
	Discover(ctx context.Context, u *models.Upstream) error
}

// check adds the problems of a, for a server of transport, to ps.
func (a *AuthSpec) check(transport string, ps *models.Problems) {
	if a == nil {
		return
	}
	if !takes(transport, "auth") {
		ps.Add("/auth", "is for http and sse servers: a stdio server takes per-person values as {{user.secret.NAME}} in its env")
	}
	for i, sc := range a.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \"\\\r\n") {
			ps.Add(fmt.Sprintf("/auth/scopes/%d", i), "%q is not a scope (no spaces, quotes or backslashes)", sc)
		}
	}
	switch a.Type {
	case models.UpstreamAuthOAuth:
		if a.Audience != "" {
			ps.Add("/auth/audience", "is for type exchange")
		}
		if a.ClientSecret != "" && a.ClientID == "" {
			ps.Add("/auth/client_secret", "needs the client_id it belongs to")
		}
		if a.ClientSecret != "" {
			checkSecretRefs("/auth/client_secret", a.ClientSecret, true, ps)
		}
		if strings.ContainsAny(a.ClientID, "\r\n\x00") {
			ps.Add("/auth/client_id", "must be one line")
		}
	case models.UpstreamAuthExchange:
		if strings.TrimSpace(a.Audience) == "" {
			ps.Add("/auth/audience", "is required for type exchange: the audience the identity provider mints the token for, usually the server's URL")
		}
		if a.ClientID != "" || a.ClientSecret != "" {
			ps.Add("/auth/client_id", "client_id and client_secret are for type oauth; exchange uses Toolbelt's own client at the identity provider")
		}
	default:
		ps.Add("/auth/type", "%q is not an auth type; use oauth or exchange", a.Type)
	}
}

// auth is the registration a asks for, before discovery.
func (a *AuthSpec) auth() *models.UpstreamAuth {
	if a == nil {
		return nil
	}
	return &models.UpstreamAuth{Type: a.Type, Scopes: a.Scopes, ClientID: a.ClientID, ClientSecret: a.ClientSecret, Audience: a.Audience}
}

// askedAuth is what an admin asked of u's auth, without what discovery
// found: two registrations asking alike are the same registration.
func askedAuth(u *models.Upstream) *models.UpstreamAuth {
	if u.Auth == nil {
		return nil
	}
	a := *u.Auth
	asked := models.UpstreamAuth{Type: a.Type, Scopes: a.Scopes, Audience: a.Audience, ClientSecret: a.ClientSecret}
	if a.Registration == models.RegistrationStatic || a.Registration == "" {
		asked.ClientID = a.ClientID
	}
	if len(asked.Scopes) == 0 {
		asked.Scopes = nil
	}
	return &asked
}

// discover fills u's auth by discovery, unless cur (the registration u
// replaces, nil when adding) asked the same of the same URL: then what cur
// found is kept, so a dynamically registered client, and the connections
// people made with it, survive an unrelated change.
func (m *Manager) discover(ctx context.Context, u, cur *models.Upstream) error {
	if u.Auth == nil {
		return nil
	}
	if cur != nil && cur.Auth != nil && cur.URL == u.URL && equalAuth(askedAuth(cur), askedAuth(u)) {
		u.Auth, u.AuthSecret = cur.Auth, cur.AuthSecret
		return nil
	}
	if m.d.Auth == nil {
		return models.ErrInvalid.Errorf("upstream server %q asks for auth %s, which this server cannot discover", u.Name, u.Auth.Type)
	}
	return m.d.Auth.Discover(ctx, u)
}

func equalAuth(a, b *models.UpstreamAuth) bool {
	return a.Type == b.Type && slices.Equal(a.Scopes, b.Scopes) && a.Audience == b.Audience &&
		a.ClientID == b.ClientID && a.ClientSecret == b.ClientSecret
}
