package testidp

import (
	"context"
	"errors"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// opStorage is the example's in-memory storage with this package's users
// and clients, the groups claim, and resource audiences. Only what
// differs is overridden; codes, tokens, keys and PKCE are the example's.
type opStorage struct {
	*storage.Storage
	idp *IDP
}

var errUnknownClient = errors.New("testidp: unknown client")

// GetClientByClientID serves this provider's clients, not the example's
// package-level registry.
func (s *opStorage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	c := s.idp.client(id)
	if c == nil {
		return nil, errUnknownClient
	}
	return opClient{c}, nil
}

// AuthorizeClientIDSecret checks a confidential client's secret.
func (s *opStorage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	c := s.idp.client(id)
	if c == nil || c.Secret == "" || c.Secret != secret {
		return errUnknownClient
	}
	return nil
}

// ClientCredentials refuses the example's built-in service user: every
// token here is issued to a person through the login form.
func (s *opStorage) ClientCredentials(context.Context, string, string) (op.Client, error) {
	return nil, errUnknownClient
}

// GetKeyByIDAndClientID refuses the example's JWT-profile key (whose
// private half is published with the example).
func (s *opStorage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errUnknownClient
}

// authRequest gives an auth request its client's audience.
type authRequest struct {
	*storage.AuthRequest
	audience []string
}

func (r *authRequest) GetAudience() []string { return r.audience }

// refreshRequest gives a refresh request its client's audience.
type refreshRequest struct {
	*storage.RefreshTokenRequest
	audience []string
}

func (r *refreshRequest) GetAudience() []string { return r.audience }

// audience is what a client's access tokens are for: its resource, or
// (OIDC's default) the client itself.
func (s *opStorage) audience(clientID string) []string {
	if c := s.idp.client(clientID); c != nil && c.Resource != "" {
		return []string{c.Resource}
	}
	return []string{clientID}
}

func (s *opStorage) wrap(r op.AuthRequest, err error) (op.AuthRequest, error) {
	if err != nil {
		return nil, err
	}
	sr := r.(*storage.AuthRequest)
	return &authRequest{AuthRequest: sr, audience: s.audience(sr.ApplicationID)}, nil
}

func (s *opStorage) CreateAuthRequest(ctx context.Context, r *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	return s.wrap(s.Storage.CreateAuthRequest(ctx, r, userID))
}

func (s *opStorage) AuthRequestByID(ctx context.Context, id string) (op.AuthRequest, error) {
	return s.wrap(s.Storage.AuthRequestByID(ctx, id))
}

func (s *opStorage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	return s.wrap(s.Storage.AuthRequestByCode(ctx, code))
}

func (s *opStorage) TokenRequestByRefreshToken(ctx context.Context, token string) (op.RefreshTokenRequest, error) {
	r, err := s.Storage.TokenRequestByRefreshToken(ctx, token)
	if err != nil {
		return nil, err
	}
	sr := r.(*storage.RefreshTokenRequest)
	return &refreshRequest{RefreshTokenRequest: sr, audience: s.audience(sr.ApplicationID)}, nil
}

// unwrap hands the example storage the request types it switches on.
func unwrap(r op.TokenRequest) op.TokenRequest {
	switch r := r.(type) {
	case *authRequest:
		return r.AuthRequest
	case *refreshRequest:
		return r.RefreshTokenRequest
	}
	return r
}

func (s *opStorage) CreateAccessToken(ctx context.Context, r op.TokenRequest) (string, time.Time, error) {
	return s.Storage.CreateAccessToken(ctx, unwrap(r))
}

func (s *opStorage) CreateAccessAndRefreshTokens(ctx context.Context, r op.TokenRequest, current string) (string, string, time.Time, error) {
	return s.Storage.CreateAccessAndRefreshTokens(ctx, unwrap(r), current)
}

// SetUserinfoFromRequest fills the ID token: the example's claims plus
// the groups claim.
func (s *opStorage) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, r op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, r, scopes); err != nil {
		return err
	}
	s.addGroups(info, r.GetSubject())
	return nil
}

// SetUserinfoFromToken fills the userinfo response: the example's claims
// plus the groups claim.
func (s *opStorage) SetUserinfoFromToken(ctx context.Context, info *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, info, tokenID, subject, origin); err != nil {
		return err
	}
	s.addGroups(info, subject)
	return nil
}

func (s *opStorage) addGroups(info *oidc.UserInfo, subject string) {
	if groups := s.idp.groups(subject); groups != nil {
		info.AppendClaims(s.idp.groupsClaim, groups)
	}
}

// GetPrivateClaimsFromScopes adds to a JWT access token what a resource
// server maps to a principal: the scopes, the groups, and who the user is.
func (s *opStorage) GetPrivateClaimsFromScopes(_ context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims := map[string]any{}
	if c := s.idp.client(clientID); c != nil && c.ScopesAsArray {
		claims["scp"] = scopes
	} else {
		claims["scope"] = strings.Join(scopes, " ")
	}
	if u := s.idp.user(userID); u != nil {
		claims[s.idp.groupsClaim] = s.idp.groups(userID)
		claims["preferred_username"] = u.Username
		if u.Email != "" {
			claims["email"] = u.Email
		}
		if u.Name != "" {
			claims["name"] = u.Name
		}
	}
	return claims, nil
}
