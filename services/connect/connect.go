// Package connect makes Toolbelt an OAuth 2.1 client of the upstream MCP
// servers that want each person's own grant: it discovers a server's
// authorization server when an admin registers it (Discover), runs each
// person's connect flow (Start, Finish: authorization code, PKCE S256,
// the resource indicator, a state bound to the person and their console
// session), hands a call the token of the person it acts for, refreshed
// once across a cluster (Token), and revokes a connection upstream when
// the person disconnects or their principal goes (Disconnect, Revoke).
//
// Tokens live in the vault: a Credential row per person and server,
// sealed with the row's owner as associated data. Every request to a
// server or its authorization server goes through the outbound policy's
// client, which refuses private addresses unless allowed and any
// redirect to another origin (a code, a refresh token or a client secret
// is never carried elsewhere).
package connect

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"toolbelt/models"
	"toolbelt/services/netpolicy"
	"toolbelt/services/runners"
	"toolbelt/services/vault"
)

// ErrNotConnected is the failure of a call whose person has no usable
// connection to the server: none, or one the server no longer honours.
// The person connects (again) at ConnectURL.
var ErrNotConnected = errors.New("not connected")

// Paths of the console and of Toolbelt's client ID metadata document,
// under the public URL.
const (
	CallbackPath       = runners.ConnectionsPage + "/callback"
	ClientDocumentPath = "/oauth/upstream-client.json"
)

// Deps is what the service works with.
type Deps struct {
	Store *models.Store
	Vault *vault.Vault
	// Net is where servers and authorization servers may be reached.
	Net netpolicy.Policy
	// Secrets are the configured secrets an admin-given client secret
	// references as {{env.NAME}}.
	Secrets map[string]string
	// PublicURL is Toolbelt's origin as browsers reach it: the redirect
	// URI and the client ID metadata document are under it.
	PublicURL string
	// Exchange says token exchange is available (TOOLBELT_OAUTH=oidc with
	// a client id and secret):
	// upstreams of auth type exchange are refused without it.
	Exchange bool
	Log      *slog.Logger
}

// Service is the OAuth client of upstream servers.
type Service struct {
	d    Deps
	http *http.Client
}

// New makes the service; it starts nothing.
func New(d Deps) *Service {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	d.PublicURL = strings.TrimSuffix(d.PublicURL, "/")
	return &Service{d: d, http: sameOrigin(d.Net.Client())}
}

// RedirectURL is where authorization servers send the person back.
func (s *Service) RedirectURL() string { return s.d.PublicURL + CallbackPath }

// ConnectURL is the console page where a person connects their account
// at server.
func (s *Service) ConnectURL(server string) string {
	return runners.ConnectURL(s.d.PublicURL, server)
}

// notConnected is ErrNotConnected for the person at server, saying why.
func (s *Service) notConnected(server, why string) error {
	return fmt.Errorf("%w: %s at the upstream server %s: connect at %s", ErrNotConnected, why, server, s.ConnectURL(server))
}

// sameOrigin makes c refuse a redirect to another origin outright: a
// token, registration or revocation request carries the code, a refresh
// token or a client secret in its body, which the policy's header rule
// does not see, and metadata fetched from elsewhere is not the server's.
func sameOrigin(c *http.Client) *http.Client {
	next := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !netpolicy.SameOrigin(via[0].URL, req.URL) {
			return fmt.Errorf("%w: %s://%s redirects to %s://%s, another origin; an OAuth request is never sent elsewhere",
				netpolicy.ErrRedirectRefused, via[0].URL.Scheme, via[0].URL.Host, req.URL.Scheme, req.URL.Host)
		}
		return next(req, via)
	}
	return c
}

// random is 32 random bytes, base64url.
func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// hash is the hex SHA-256 of s: what is stored of a state or a binding.
func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// now is the service's clock.
func now() time.Time { return time.Now().UTC() }

// clientAAD is the associated data of a dynamically registered client's
// secret: the server it belongs to.
func clientAAD(server string) []string { return []string{"upstream-client", server} }

// oauthUpstream reads server and checks it is connected per person.
func (s *Service) oauthUpstream(ctx context.Context, server string) (*models.Upstream, error) {
	u, err := s.d.Store.UpstreamByName(ctx, server)
	if err != nil {
		return nil, err
	}
	if u.Auth == nil || u.Auth.Type != models.UpstreamAuthOAuth {
		return nil, models.ErrInvalid.Errorf("upstream server %q takes no per-person connection (its auth is not oauth)", server)
	}
	return u, nil
}
