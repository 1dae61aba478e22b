package connect

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zitadel/oidc/v3/pkg/client"
	"github.com/zitadel/oidc/v3/pkg/client/tokenexchange"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"golang.org/x/sync/singleflight"

	"toolbelt/internal/ttlcache"
	"toolbelt/models"
	"toolbelt/services/runners"
)

// mintedFor is the longest a minted token is kept, whatever its expiry.
const mintedFor = time.Hour

// expiryMargin is how long before its expiry a minted token is no longer
// handed out, so a call that starts with it does not see it expire
// upstream (half its lifetime for a token shorter than twice this).
const expiryMargin = time.Minute

// exchangeTimeout bounds one exchange (discovery included).
const exchangeTimeout = 30 * time.Second

// retryDiscovery is how long a failed discovery of the provider is not
// tried again, so calls made while it is down do not each wait on it.
const retryDiscovery = 5 * time.Second

// Exchanger gets the token for an upstream configured for token exchange
// (models.UpstreamAuthExchange): the organisation's OpenID provider
// mints it from the access token the caller authenticated with (RFC
// 8693), so nobody connects an account and no grant is stored. The
// upstream sees the person as the provider knows them, in a token whose
// audience is that upstream's alone: a token minted for one upstream is
// never sent to another, which would refuse it.
//
// Minted tokens are kept in memory, per principal, upstream, exchange
// request and subject token, until shortly before they expire; never
// stored, logged or shown. A call with no subject token (a key, a token
// of Toolbelt's own sign-in, a call run in the background) fails
// UPSTREAM_NOT_CONNECTED saying so.
type Exchanger struct {
	issuer, clientID, clientSecret string
	client                         *http.Client
	log                            *slog.Logger
	now                            func() time.Time

	mu       sync.Mutex
	endpoint tokenexchange.TokenExchanger // nil until discovered
	failed   time.Time                    // when discovery last failed
	failure  error

	minted *ttlcache.Cache[[sha256.Size]byte, mintedToken]
	flight singleflight.Group
}

type mintedToken struct {
	token string
	until time.Time // handed out before this only
}

// ExchangerDeps is what an Exchanger needs.
type ExchangerDeps struct {
	// Issuer is the organisation's OpenID provider
	// (TOOLBELT_OIDC_ISSUER): its discovery document names the token
	// endpoint, unless TokenEndpoint does.
	Issuer, TokenEndpoint string
	// ClientID and ClientSecret are Toolbelt's confidential client at
	// the provider (TOOLBELT_OIDC_CLIENT_ID, _SECRET), which the
	// provider must allow the token exchange grant for the upstreams'
	// audiences.
	ClientID, ClientSecret string
	// Client reaches the provider: the outbound policy's client with its
	// addresses allowed (identity.Settings.Policy).
	Client *http.Client
	Log    *slog.Logger
}

// NewExchanger returns the exchanger; it contacts the provider at the
// first exchange, not before.
func NewExchanger(d ExchangerDeps) *Exchanger {
	e := &Exchanger{issuer: d.Issuer, clientID: d.ClientID, clientSecret: d.ClientSecret, client: d.Client, log: d.Log,
		now: time.Now, minted: ttlcache.New[[sha256.Size]byte, mintedToken](4096, mintedFor)}
	if d.TokenEndpoint != "" {
		e.endpoint = e.exchanger(d.TokenEndpoint)
	}
	return e
}

// Token returns the access token for the person c acts for at u, an
// upstream whose Auth.Type is exchange: minted by the provider from
// c.SubjectToken (or, when a shared connection's request asks, the
// call's token on ctx: runners.WithSubjectToken) for the audience u.Auth.Audience (default: the
// resource), the resource u.Auth.Resource (default: u.URL) and the scopes
// u.Auth.Scopes, or kept from a previous exchange of the same token for
// the same upstream. A *runners.Error explains a failure the caller can
// act on: UPSTREAM_NOT_CONNECTED when the call has no subject token or
// the provider refuses it, UPSTREAM_ERROR when the provider refuses
// Toolbelt's client or the audience, or cannot be reached.
func (e *Exchanger) Token(ctx context.Context, u *models.Upstream, c *runners.Call) (string, error) {
	if u.Auth == nil || u.Auth.Type != models.UpstreamAuthExchange {
		return "", fmt.Errorf("upstream server %s is not configured for token exchange", u.Name)
	}
	subject := cmp.Or(c.SubjectToken, runners.SubjectTokenOf(ctx))
	if c.Principal == nil || subject == "" {
		return "", e.noSubjectToken(u)
	}
	req := exchangeRequest{resource: cmp.Or(u.Auth.Resource, u.URL), scopes: u.Auth.Scopes}
	req.audience = cmp.Or(u.Auth.Audience, req.resource)
	if req.audience == "" {
		return "", &runners.Error{Code: models.CodeUpstream, Message: fmt.Sprintf("the upstream server %s is configured for token exchange but names no audience to ask a token for", u.Name),
			Suggestion: "Tell an administrator: set auth.audience of the upstream server " + u.Name + "."}
	}
	key := req.key(c.Principal.ID, u, subject)
	if m, ok := e.minted.Get(key); ok && e.now().Before(m.until) {
		return m.token, nil
	}
	token, err, _ := e.flight.Do(hex.EncodeToString(key[:]), func() (any, error) {
		if m, ok := e.minted.Get(key); ok && e.now().Before(m.until) {
			return m.token, nil
		}
		// Shared by the calls waiting on it: the first one's end does
		// not end it for the others.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), exchangeTimeout)
		defer cancel()
		return e.exchange(fctx, u, c.Principal, subject, req, key)
	})
	if err != nil {
		return "", err
	}
	return token.(string), nil
}

// exchangeRequest is what a token exchange asks for.
type exchangeRequest struct {
	audience, resource string
	scopes             []string
}

// key names a minted token: whose, for which upstream, asked how, from
// which subject token (its hash: a new sign-in exchanges again).
func (r exchangeRequest) key(principal uint, u *models.Upstream, subject string) [sha256.Size]byte {
	h := sha256.New()
	field := func(s string) {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	h.Write(binary.AppendUvarint(nil, uint64(principal)))
	h.Write(binary.AppendUvarint(nil, uint64(u.ID)))
	for _, s := range append([]string{u.Name, r.audience, r.resource, subject}, r.scopes...) {
		field(s)
	}
	return [sha256.Size]byte(h.Sum(nil))
}

// exchange asks the provider for a token and keeps it until shortly
// before it expires.
func (e *Exchanger) exchange(ctx context.Context, u *models.Upstream, p *models.Principal, subject string, r exchangeRequest, key [sha256.Size]byte) (string, error) {
	te, err := e.discover(ctx)
	if err != nil {
		return "", &runners.Error{Code: models.CodeUpstream, Retryable: true,
			Message:    fmt.Sprintf("the upstream server %s needs a token from the identity provider %s, which could not be reached: %v", u.Name, e.issuer, err),
			Suggestion: "Try again in a minute; if it persists, tell an administrator the identity provider is unreachable."}
	}
	var resource []string
	if r.resource != "" {
		resource = []string{r.resource}
	}
	started := e.now()
	resp, err := tokenexchange.ExchangeToken(ctx, te, subject, oidc.AccessTokenType, "", "",
		resource, []string{r.audience}, r.scopes, oidc.AccessTokenType)
	if err != nil {
		return "", e.refused(ctx, u, p, subject, r, err)
	}
	if resp.AccessToken == "" || !strings.EqualFold(resp.TokenType, oidc.BearerToken) ||
		(resp.IssuedTokenType != oidc.AccessTokenType && resp.IssuedTokenType != oidc.JWTTokenType) {
		return "", &runners.Error{Code: models.CodeUpstream,
			Message: fmt.Sprintf("the identity provider %s answered the token exchange for the upstream server %s with no bearer access token (issued %q, token type %q)",
				e.issuer, u.Name, resp.IssuedTokenType, resp.TokenType),
			Suggestion: "Tell an administrator: the provider must issue access tokens by token exchange (RFC 8693) to Toolbelt's client."}
	}
	if ttl := time.Duration(resp.ExpiresIn) * time.Second; ttl > 0 {
		e.minted.Add(key, mintedToken{token: resp.AccessToken, until: started.Add(ttl - min(expiryMargin, ttl/2))})
	}
	e.log.DebugContext(ctx, "token exchanged", "upstream", u.Name, "principal", p.ID, "audience", r.audience, "expires_in", resp.ExpiresIn)
	return resp.AccessToken, nil
}

// refused turns the provider's refusal into what the caller can act on,
// without the subject token, even should the provider quote it.
func (e *Exchanger) refused(ctx context.Context, u *models.Upstream, p *models.Principal, subject string, r exchangeRequest, err error) error {
	said := strings.ReplaceAll(err.Error(), subject, "[the caller's token]")
	e.log.WarnContext(ctx, "token exchange refused", "upstream", u.Name, "principal", p.ID, "audience", r.audience, "err", said)
	var oe *oidc.Error
	if !errors.As(err, &oe) {
		return &runners.Error{Code: models.CodeUpstream, Retryable: true,
			Message:    fmt.Sprintf("the token exchange at the identity provider %s for the upstream server %s failed: %s", e.issuer, u.Name, said),
			Suggestion: "Try again in a minute; if it persists, tell an administrator."}
	}
	said = strings.ReplaceAll(cmp.Or(oe.Description, string(oe.ErrorType)), subject, "[the caller's token]")
	switch oe.ErrorType {
	case oidc.InvalidRequest, oidc.InvalidGrant, oidc.AccessDenied:
		// The person's token: expired since, revoked, or not one the
		// provider lets Toolbelt exchange.
		return &runners.Error{Code: models.CodeUpstreamNotConnected,
			Message: fmt.Sprintf("the identity provider %s refused to exchange the caller's token for one for the upstream server %s (%s: %s)",
				e.issuer, u.Name, oe.ErrorType, said),
			Suggestion: fmt.Sprintf("Sign in again at %s for a new access token and call again; if it is refused again, tell an administrator the provider does not let Toolbelt's client exchange that person's tokens.", e.issuer)}
	}
	return &runners.Error{Code: models.CodeUpstream,
		Message: fmt.Sprintf("the identity provider %s refused Toolbelt's token exchange for the upstream server %s (%s: %s)",
			e.issuer, u.Name, oe.ErrorType, said),
		Suggestion: fmt.Sprintf("Tell an administrator: the provider must let Toolbelt's client %q use the token exchange grant for the audience %s.", e.clientID, r.audience)}
}

// noSubjectToken is the failure of a call with no token to exchange.
func (e *Exchanger) noSubjectToken(u *models.Upstream) *runners.Error {
	return &runners.Error{Code: models.CodeUpstreamNotConnected,
		Message: fmt.Sprintf("the upstream server %s gets a token for the person this call acts for by token exchange at %s, from the access token the caller authenticated with, and this call has none: "+
			"a call run in the background (async, after an approval, or taken over by another instance) does not keep the caller's token, and an API key or a token of Toolbelt's own sign-in cannot be exchanged",
			u.Name, e.issuer),
		Suggestion: fmt.Sprintf("Call the tool synchronously (without async), authenticated with an access token of %s for the person you act for.", e.issuer)}
}

// discover returns the provider's token endpoint, reading its discovery
// document the first time (and again after a failure, no sooner than
// retryDiscovery). A provider that lists its grant types without token
// exchange is refused at once.
func (e *Exchanger) discover(ctx context.Context) (tokenexchange.TokenExchanger, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.endpoint != nil {
		return e.endpoint, nil
	}
	if e.failure != nil && e.now().Sub(e.failed) < retryDiscovery {
		return nil, e.failure
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cfg, err := client.Discover(dctx, e.issuer, e.client)
	switch {
	case err != nil:
		err = fmt.Errorf("discover the OpenID provider %s: %w", e.issuer, err)
	case cfg.TokenEndpoint == "":
		err = fmt.Errorf("the OpenID provider %s names no token endpoint", e.issuer)
	case len(cfg.GrantTypesSupported) > 0 && !slices.Contains(cfg.GrantTypesSupported, oidc.GrantTypeTokenExchange):
		err = fmt.Errorf("the OpenID provider %s does not offer the token exchange grant (%s)", e.issuer, oidc.GrantTypeTokenExchange)
	}
	if err != nil {
		e.failed, e.failure = e.now(), err
		return nil, err
	}
	e.endpoint, e.failure = e.exchanger(cfg.TokenEndpoint), nil
	return e.endpoint, nil
}

// exchanger is zitadel's RFC 8693 client for the token endpoint, with
// Toolbelt's client credentials (HTTP Basic).
func (e *Exchanger) exchanger(endpoint string) tokenexchange.TokenExchanger {
	// With a static endpoint nothing is fetched, so this cannot fail.
	te, _ := tokenexchange.NewTokenExchangerClientCredentials(context.Background(), e.issuer, e.clientID, e.clientSecret,
		tokenexchange.WithHTTPClient(e.client), tokenexchange.WithStaticTokenEndpoint(e.issuer, endpoint))
	return te
}
