package identity

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"toolbelt/internal/ttlcache"
	"toolbelt/models"
	"toolbelt/services/access"
)

// ClockSkew is how long past its exp a token is still accepted, for
// clocks that disagree a little.
const ClockSkew = 30 * time.Second

// tokenCacheTTL bounds how long a verified token is trusted without
// verifying it again: as long as a cached API key (authCacheTTL), so a
// call with a token costs what a call with a key costs.
const tokenCacheTTL = 10 * time.Second

// retryDiscovery is how long a failed discovery of the issuer is not
// tried again, so tokens arriving while the provider is down do not each
// wait on it.
const retryDiscovery = 5 * time.Second

// JWTVerifier accepts the JWT access tokens of one external issuer (the
// authorization server an operator put in front of /mcp and /api/v1) as
// the principal People maps the person to. It implements
// access.TokenVerifier.
//
// A token is verified by go-oidc against the issuer's discovery document
// and JWKS (fetched through client, which the outbound network policy
// governs): signature with an algorithm the issuer advertises (never
// "none", never HMAC), iss exactly the issuer, exp (ClockSkew), then aud
// against the resource the request is for (RFC 8707, access.AudienceFits). Its scopes are
// those of "scope" (space-separated) or "scp" (an array) that the
// principal's role may hold.
type JWTVerifier struct {
	issuer   string
	people   *People
	accounts *access.Accounts
	client   *http.Client
	log      *slog.Logger
	now      func() time.Time

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier // nil until the issuer is discovered
	failed   time.Time             // when discovery last failed
	failure  error

	// verified caches sha256(token) → what verifying it found, for
	// tokenCacheTTL at most and never past the token's exp or the
	// accounts' generation it was made in.
	verified *ttlcache.Cache[[sha256.Size]byte, verifiedToken]
}

type verifiedToken struct {
	grant      access.Grant
	audience   []string
	generation uint64
}

var _ access.TokenVerifier = (*JWTVerifier)(nil)

// JWTVerifierDeps is what a JWTVerifier needs.
type JWTVerifierDeps struct {
	// Issuer is the issuer URL exactly as in its tokens' iss.
	Issuer string
	People *People
	// Accounts tells, by its Generation, when cached tokens must be
	// verified again (a principal disabled or its role changed).
	Accounts *access.Accounts
	// Client fetches discovery and keys; the outbound policy's client
	// (netpolicy.Policy.Client) with the issuer's addresses allowed. Its
	// GETs are answered from the last answer for keysRefetch.
	Client *http.Client
	Log    *slog.Logger
}

// NewJWTVerifier returns the verifier; it contacts the issuer at the
// first token, not before.
func NewJWTVerifier(d JWTVerifierDeps) *JWTVerifier {
	client := *d.Client
	client.Transport = newThrottled(d.Client.Transport)
	return &JWTVerifier{issuer: d.Issuer, people: d.People, accounts: d.Accounts, client: &client, log: d.Log,
		now: time.Now, verified: ttlcache.New[[sha256.Size]byte, verifiedToken](4096, tokenCacheTTL)}
}

// Issuer is the issuer whose tokens v accepts.
func (v *JWTVerifier) Issuer() string { return v.issuer }

// Verify returns the grant of a JWT of v's issuer for resource.
// access.ErrNotMine: the token is not a JWT, or names another issuer (its
// iss is read before anything is verified, only to route it). Otherwise
// an error wrapping models.ErrUnauthorized when it is badly signed,
// expired, for another resource, names no subject, or its principal is
// disabled; models.ErrForbidden when its person is in none of the mapped
// groups.
func (v *JWTVerifier) Verify(ctx context.Context, token, resource string) (*access.Grant, error) {
	// A token in the cache was verified as this issuer's: only a new one
	// has its payload read for the issuer (a JSON decode per call cost a
	// cached call 10 µs more than a key's).
	key, now, gen := sha256.Sum256([]byte(token)), v.now(), v.accounts.Generation()
	e, ok := v.verified.Get(key)
	if !ok && unverifiedIssuer(token) != v.issuer {
		return nil, access.ErrNotMine
	}
	if !ok || e.generation != gen || !now.Before(e.grant.Expires.Add(ClockSkew)) {
		var err error
		if e, err = v.verify(ctx, token, resource, gen); err != nil {
			return nil, err
		}
		v.verified.Add(key, e)
	} else if err := v.checkAudience(e.audience, resource); err != nil {
		return nil, err
	}
	g := e.grant
	p := *g.Principal
	g.Principal, g.Scopes = &p, slices.Clone(g.Scopes)
	g.SubjectToken = token // on the copy: the cache keeps only its hash
	return &g, nil
}

// checkAudience refuses a token whose aud is not resource (RFC 8707).
func (v *JWTVerifier) checkAudience(aud []string, resource string) error {
	if access.AudienceFits(aud, resource) {
		return nil
	}
	return models.ErrUnauthorized.Errorf("the token is for %s, not %s; ask %s for a token for this resource",
		cmp.Or(strings.Join(aud, ", "), "no audience"), resource, v.issuer)
}

// verify checks a token at the issuer's keys and for resource, then maps
// its person to a principal, in accounts generation gen. A token for
// another resource is refused before its person is looked at: it creates
// no principal.
func (v *JWTVerifier) verify(ctx context.Context, token, resource string, gen uint64) (verifiedToken, error) {
	verifier, err := v.discover(ctx)
	if err != nil {
		return verifiedToken{}, err
	}
	t, err := verifier.Verify(ctx, token)
	if err != nil {
		var expired *oidc.TokenExpiredError
		if errors.As(err, &expired) {
			return verifiedToken{}, models.ErrUnauthorized.Errorf("the token expired at %s; get a new one from %s", expired.Expiry.UTC().Format(time.RFC3339), v.issuer)
		}
		v.log.DebugContext(ctx, "token refused", "issuer", v.issuer, "err", err)
		return verifiedToken{}, models.ErrUnauthorized.Errorf("the token is not a valid token of %s", v.issuer)
	}
	if err := v.checkAudience(t.Audience, resource); err != nil {
		return verifiedToken{}, err
	}
	var claims map[string]any
	if err := t.Claims(&claims); err != nil {
		return verifiedToken{}, models.ErrUnauthorized.Errorf("the token's claims cannot be read: %v", err)
	}
	who, err := v.people.Roles().PersonFromClaims(v.issuer, claims)
	if err != nil {
		return verifiedToken{}, err
	}
	p, err := v.people.Principal(ctx, who)
	if err != nil {
		return verifiedToken{}, err
	}
	str := func(k string) string { s, _ := claims[k].(string); return s }
	return verifiedToken{
		grant: access.Grant{Principal: p, Scopes: grantedScopes(claims, p.Role), ClientID: cmp.Or(str("client_id"), str("azp")),
			Issuer: v.issuer, Subject: t.Subject, TokenID: str("jti"), Expires: t.Expiry,
			Person: models.PersonName(cmp.Or(who.Name, who.Username), who.Email, who.Subject, who.Issuer)},
		audience:   t.Audience,
		generation: gen,
	}, nil
}

// discover returns the verifier of the issuer's tokens, reading its
// discovery document the first time (and again after a failure, no
// sooner than retryDiscovery).
func (v *JWTVerifier) discover(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.verifier != nil {
		return v.verifier, nil
	}
	if v.failure != nil && v.now().Sub(v.failed) < retryDiscovery {
		return nil, v.failure
	}
	// The key set outlives this request: it fetches keys with a context
	// of its own, through the policy's client.
	keysCtx := oidc.ClientContext(context.WithoutCancel(ctx), v.client)
	dctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, v.client), 10*time.Second)
	defer cancel()
	provider, err := oidc.NewProvider(dctx, v.issuer)
	if err != nil {
		v.failed, v.failure = v.now(), fmt.Errorf("discover the OpenID provider %s: %w", v.issuer, err)
		v.log.WarnContext(ctx, "OpenID provider not reachable", "issuer", v.issuer, "err", err)
		return nil, v.failure
	}
	// Access tokens are not for a client: the audience is checked against
	// the resource instead. The algorithms are the provider's
	// (id_token_signing_alg_values_supported) that go-oidc supports:
	// asymmetric only, never "none".
	v.verifier = provider.VerifierContext(keysCtx, &oidc.Config{SkipClientIDCheck: true,
		Now: func() time.Time { return v.now().Add(-ClockSkew) }})
	v.failure = nil
	return v.verifier, nil
}

// grantedScopes are the token's scopes ("scope", space-separated, or
// "scp", an array or string) that role may hold.
func grantedScopes(claims map[string]any, role string) []string {
	var asked []string
	if s, ok := claims["scope"].(string); ok {
		asked = strings.Fields(s)
	}
	switch scp := claims["scp"].(type) {
	case []any:
		for _, s := range scp {
			if str, ok := s.(string); ok {
				asked = append(asked, str)
			}
		}
	case string:
		asked = append(asked, strings.Fields(scp)...)
	}
	return access.GrantableScopes(role, asked)
}

// unverifiedIssuer reads the iss claim of what looks like a JWT, without
// verifying anything: only to tell whose token it is. "" when it is not a
// JWT.
func unverifiedIssuer(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(parts[1]) > 16<<10 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Issuer string `json:"iss"`
	}
	if json.Unmarshal(payload, &c) != nil {
		return ""
	}
	return c.Issuer
}
