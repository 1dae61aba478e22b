package access

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"toolbelt/models"
)

// The scopes an OAuth access token may carry. Each route of the API
// names the one it needs; Casbin holds them as "scope:<s>" policies
// beside the roles', so a token never gives more than its principal's
// role, and never more than its scopes.
const (
	// ScopeRead reads the catalog and selects tools.
	ScopeRead = "tools:read"
	// ScopeCall calls tools (and cancels the caller's calls).
	ScopeCall = "tools:call"
	// ScopeApprove decides approvals.
	ScopeApprove = "approve"
	// ScopeAdmin administers: tools, principals, keys, servers, audit.
	ScopeAdmin = "admin"
	// ScopeSecrets stores and deletes the principal's own secrets (the
	// values tools send as {{user.secret.NAME}} for them) and disconnects
	// its own accounts at upstreams. Apart from
	// tools:call: an agent host that calls tools as a person must not
	// plant what those tools send for the person (a secret of its own
	// choosing, to see their calls arrive where it listens), nor delete
	// it; listing the names is tools:read.
	ScopeSecrets = "secrets:write"
)

// Scopes lists every scope, in the order metadata and consent pages show
// them.
var Scopes = []string{ScopeRead, ScopeCall, ScopeApprove, ScopeAdmin, ScopeSecrets}

// roleScopes are the scopes each role may hold: what its routes need.
var roleScopes = map[string][]string{
	RoleAdmin:    Scopes,
	RoleReviewer: {ScopeRead, ScopeApprove, ScopeSecrets},
	RoleAgent:    {ScopeRead, ScopeCall, ScopeSecrets},
}

// RoleScopes returns the scopes a principal of role may hold; an API key
// carries all of them. An unknown role holds none.
func RoleScopes(role string) []string { return slices.Clone(roleScopes[role]) }

// GrantableScopes returns the asked scopes a principal of role may be
// granted, in Scopes' order: what a token issued to it carries.
func GrantableScopes(role string, asked []string) []string {
	var out []string
	for _, s := range roleScopes[role] {
		if slices.Contains(asked, s) {
			out = append(out, s)
		}
	}
	return out
}

// Grant is what a verified bearer token that is not an API key says:
// whose it is, what it allows, and who issued it to which client.
type Grant struct {
	Principal *models.Principal
	// Scopes are what the token allows; never more than
	// RoleScopes(Principal.Role).
	Scopes []string
	// ClientID is the OAuth client the token was issued to.
	ClientID string
	// Issuer issued it (Toolbelt's public URL for the embedded server).
	Issuer string
	// Subject is the person's id at the issuer.
	Subject string
	// TokenID is the token's id at the issuer, for the audit log; never
	// the token.
	TokenID string
	Expires time.Time
	// Person names the individual at an outside issuer
	// (models.PersonName), for the audit log and approvals; empty when
	// the principal is who the token names.
	Person string
	// SubjectToken is the token itself when its issuer is the
	// organisation's OpenID provider, which may exchange it for a token
	// for an upstream server (RFC 8693); empty for the embedded server's
	// tokens. Memory only: never stored, logged or cached.
	SubjectToken string
}

// A TokenVerifier checks a bearer token that is not an API key, for one
// resource: the absolute URL the request is for ("<public>/mcp" or
// "<public>/api/v1").
type TokenVerifier interface {
	// Verify returns the token's grant; ErrNotMine when the token is not
	// of the kind it verifies (the next verifier is asked); otherwise an
	// error wrapping models.ErrUnauthorized when the token is invalid,
	// expired, revoked, issued for another resource (RFC 8707: check
	// with AudienceFits), or its principal is disabled or deleted.
	Verify(ctx context.Context, token, resource string) (*Grant, error)
}

// AudienceFits reports whether a token for the audiences aud may be used
// at resource (RFC 8707): aud names the resource, or the whole server
// (its origin: what a client that found the root protected-resource
// metadata asks a token for).
func AudienceFits(aud []string, resource string) bool {
	if oauthex.MatchesResource(aud, resource) {
		return true
	}
	u, err := url.Parse(resource)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return false
	}
	return oauthex.MatchesResource(aud, u.Scheme+"://"+u.Host)
}

// ErrNotMine is a TokenVerifier's answer for a token of another kind.
var ErrNotMine = errors.New("access: not a token of this kind")

// VerifyToken asks each verifier in turn for the token's grant; for a
// token none of them knows it answers ErrNotMine (it may be a key).
func VerifyToken(ctx context.Context, verifiers []TokenVerifier, token, resource string) (*Grant, error) {
	for _, v := range verifiers {
		g, err := v.Verify(ctx, token, resource)
		if errors.Is(err, ErrNotMine) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return g, nil
	}
	return nil, ErrNotMine
}
