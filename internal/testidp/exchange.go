package testidp

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Exchange is one token exchange (RFC 8693) the provider granted: who
// asked, for whom, and for what. No token is kept.
type Exchange struct {
	Client    string   // the client that presented the subject token
	Subject   string   // the person the new token names (sub)
	Audience  []string // the audiences asked for: the new token's aud
	Resources []string // the resource indicators sent with them
	Scopes    []string
}

// Exchanges returns the token exchanges granted so far, oldest first.
func (idp *IDP) Exchanges() []Exchange {
	idp.mu.Lock()
	defer idp.mu.Unlock()
	return slices.Clone(idp.exchanges)
}

// The example storage's token exchange is its impersonation demo (only
// its admin users, a refresh token by default): the methods below replace
// it with what an organisation's provider configured for Toolbelt does.
// zitadel's op has already verified the subject token by then (this
// provider's signature, issuer and expiry; a forged or expired one is
// "subject_token is invalid"), and authenticated the client by its
// secret.

// ValidateTokenExchangeRequest grants a client with ExchangeTo a JWT
// access token for the same person, for audiences in its ExchangeTo, in
// exchange for an access token of a person of this provider that was
// issued for one of its ExchangeFrom. Everything else is refused with the
// RFC 8693 error a real provider answers: an actor token, another
// subject or requested token type, a subject token for another audience,
// an audience the client may not ask for.
func (s *opStorage) ValidateTokenExchangeRequest(_ context.Context, r op.TokenExchangeRequest) error {
	c := s.idp.client(r.GetClientID())
	if c == nil || len(c.ExchangeTo) == 0 {
		return oidc.ErrUnauthorizedClient().WithDescription("client %q may not use token exchange", r.GetClientID())
	}
	if r.GetExchangeActorTokenIDOrToken() != "" {
		return oidc.ErrInvalidRequest().WithDescription("actor_token is not supported")
	}
	if r.GetExchangeSubjectTokenType() != oidc.AccessTokenType {
		return oidc.ErrInvalidRequest().WithDescription("subject_token_type must be %s", oidc.AccessTokenType)
	}
	switch r.GetRequestedTokenType() {
	case "", oidc.AccessTokenType:
		r.SetRequestedTokenType(oidc.AccessTokenType)
	default:
		return oidc.ErrInvalidRequest().WithDescription("requested_token_type must be %s", oidc.AccessTokenType)
	}
	if aud := audienceOf(r.GetExchangeSubjectTokenClaims()); !slices.ContainsFunc(aud, func(a string) bool { return slices.Contains(c.ExchangeFrom, a) }) {
		return oidc.ErrInvalidRequest().WithDescription("subject_token is for %s, not a resource client %q may exchange tokens of", strings.Join(aud, ", "), c.ID)
	}
	if s.idp.user(r.GetExchangeSubject()) == nil {
		return oidc.ErrInvalidRequest().WithDescription("subject_token names no user")
	}
	if len(r.GetAudience()) == 0 {
		return oidc.ErrInvalidTarget().WithDescription("send the audience the new token is for")
	}
	for _, target := range slices.Concat(r.GetAudience(), r.GetResourses()) {
		if !slices.Contains(c.ExchangeTo, target) {
			return oidc.ErrInvalidTarget().WithDescription("client %q may not ask tokens for %s", c.ID, target)
		}
	}
	return nil
}

// CreateTokenExchangeRequest records the exchange (not its tokens).
func (s *opStorage) CreateTokenExchangeRequest(_ context.Context, r op.TokenExchangeRequest) error {
	s.idp.mu.Lock()
	defer s.idp.mu.Unlock()
	s.idp.exchanges = append(s.idp.exchanges, Exchange{Client: r.GetClientID(), Subject: r.GetSubject(),
		Audience: slices.Clone(r.GetAudience()), Resources: slices.Clone(r.GetResourses()), Scopes: slices.Clone(r.GetScopes())})
	return nil
}

// GetPrivateClaimsFromTokenExchangeRequest gives the new token the claims
// of any access token of this provider for the person, and "act" naming
// the client that acts for them (RFC 8693 §4.1).
func (s *opStorage) GetPrivateClaimsFromTokenExchangeRequest(ctx context.Context, r op.TokenExchangeRequest) (map[string]any, error) {
	claims, err := s.GetPrivateClaimsFromScopes(ctx, r.GetSubject(), r.GetClientID(), r.GetScopes())
	if err != nil {
		return nil, err
	}
	claims["act"] = map[string]any{"sub": r.GetClientID()}
	return claims, nil
}

// SetUserinfoFromTokenExchangeRequest is never reached: only access
// tokens are issued by exchange here.
func (s *opStorage) SetUserinfoFromTokenExchangeRequest(context.Context, *oidc.UserInfo, op.TokenExchangeRequest) error {
	return fmt.Errorf("testidp: no ID token by token exchange")
}

// audienceOf reads a JWT's aud claim, a string or an array.
func audienceOf(claims map[string]any) []string {
	switch aud := claims["aud"].(type) {
	case string:
		return []string{aud}
	case []any:
		var out []string
		for _, a := range aud {
			if s, ok := a.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
