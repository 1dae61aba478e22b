package authserver

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"toolbelt/models"
)

// Lifetimes: an access token is short (revocation is immediate anyway, but
// a stolen one is worth little), a refresh token lasts 30 days from its
// last use (it rotates on each), a request from authorize to code
// redemption 10 minutes.
const (
	AccessTokenTTL  = 10 * time.Minute
	RefreshTokenTTL = 30 * 24 * time.Hour
	AuthRequestTTL  = 10 * time.Minute
)

// storage is op.Storage over the models' oauth tables.
type storage struct{ s *Server }

var _ op.Storage = storage{}

func newID() string { return rand.Text() }

// invalidTarget is RFC 8707's error for a resource this server does not
// issue tokens for.
func invalidTarget(format string, args ...any) *oidc.Error {
	e := oidc.ErrInvalidRequest().WithDescription(format, args...)
	e.ErrorType = "invalid_target"
	return e
}

func (st storage) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	if req.CodeChallenge == "" {
		return nil, oidc.ErrInvalidRequest().WithDescription("code_challenge is missing: PKCE is required, with code_challenge_method=S256")
	}
	if req.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return nil, oidc.ErrInvalidRequest().WithDescription("code_challenge_method must be S256 (%q is not accepted)", req.CodeChallengeMethod)
	}
	resource, err := st.s.resource(ctx, "")
	if err != nil {
		return nil, err
	}
	if req.ResponseMode != "" && req.ResponseMode != oidc.ResponseModeQuery {
		return nil, oidc.ErrInvalidRequest().WithDescription("response_mode must be query")
	}
	scopes := slices.DeleteFunc(slices.Clone(req.Scopes), func(s string) bool {
		return !slices.Contains(Scopes, s) && s != oidc.ScopeOpenID && s != oidc.ScopeOfflineAccess
	})
	if !slices.ContainsFunc(scopes, func(s string) bool { return slices.Contains(Scopes, s) }) {
		return nil, oidc.ErrInvalidScope().WithDescription("ask for one or more of the scopes %s", strings.Join(Scopes, " "))
	}
	// Every client may refresh: op issues a refresh token only with
	// offline_access, which MCP clients do not all ask for.
	if !slices.Contains(scopes, oidc.ScopeOfflineAccess) {
		scopes = append(scopes, oidc.ScopeOfflineAccess)
	}
	now := st.s.now()
	r := &models.OAuthAuthRequest{ID: newID(), ClientID: req.ClientID, RedirectURI: req.RedirectURI, State: req.State, Nonce: req.Nonce,
		ResponseMode: string(req.ResponseMode), Scopes: strings.Join(scopes, " "), Resource: resource,
		CodeChallenge: req.CodeChallenge, CodeChallengeMethod: string(req.CodeChallengeMethod), CreatedAt: now, ExpiresAt: now.Add(AuthRequestTTL)}
	if err := st.s.store.CreateOAuthAuthRequest(ctx, r); err != nil {
		return nil, err
	}
	return authRequest{r}, nil
}

func (st storage) AuthRequestByID(ctx context.Context, id string) (op.AuthRequest, error) {
	r, err := st.s.store.OAuthAuthRequestByID(ctx, id, st.s.now())
	if err != nil {
		return nil, err
	}
	return authRequest{r}, nil
}

// AuthRequestByCode redeems a code, once: a second redemption is refused
// and revokes the tokens the first one got (RFC 6749 §4.1.2).
func (st storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	r, err := st.s.store.ClaimOAuthCode(ctx, hash(code), st.s.now())
	if errors.Is(err, models.ErrCodeReused) {
		st.s.revoked(ctx)
		st.s.log.WarnContext(ctx, "oauth: an authorization code was used twice; the tokens it gave are revoked")
	}
	if err != nil {
		return nil, err
	}
	if _, err := st.s.resource(ctx, r.Resource); err != nil {
		return nil, err
	}
	if err := st.s.stillGranted(ctx, *r.PrincipalID, r.ClientID); err != nil {
		return nil, err
	}
	return authRequest{r}, nil
}

func (st storage) SaveAuthCode(ctx context.Context, id, code string) error {
	return st.s.store.SetOAuthCode(ctx, id, hash(code))
}

// DeleteAuthRequest keeps the request: its used code must stay known so a
// second use is recognised. Expired requests are pruned.
func (st storage) DeleteAuthRequest(context.Context, string) error { return nil }

func (st storage) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	a, ok := req.(authRequest)
	if !ok {
		return "", time.Time{}, oidc.ErrUnsupportedGrantType()
	}
	t := st.s.tokenFor(a.r, st.s.now())
	if err := st.s.store.CreateOAuthTokens(ctx, t); err != nil {
		return "", time.Time{}, err
	}
	return t.ID, t.ExpiresAt, nil
}

func (st storage) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	now := st.s.now()
	var acc *models.OAuthToken
	switch r := req.(type) {
	case authRequest:
		acc = st.s.tokenFor(r.r, now)
	case *refreshRequest:
		ok, err := st.s.store.RotateOAuthToken(ctx, r.t.ID, now)
		if err != nil {
			return "", "", time.Time{}, err
		}
		if !ok { // redeemed meanwhile by another request: a reuse
			return "", "", time.Time{}, st.s.reused(ctx, r.t)
		}
		acc = &models.OAuthToken{ID: newID(), Kind: models.OAuthAccess, GrantID: r.t.GrantID, AuthRequestID: r.t.AuthRequestID,
			FamilyID: r.t.FamilyID, PrincipalID: r.t.PrincipalID, ClientID: r.t.ClientID, Scopes: strings.Join(r.scopes, " "),
			Audience: r.t.Audience, AuthTime: r.t.AuthTime, CreatedAt: now, ExpiresAt: now.Add(AccessTokenTTL)}
		acc.ParentID = &r.t.ID
	default:
		return "", "", time.Time{}, oidc.ErrUnsupportedGrantType()
	}
	secret := RefreshPrefix + rand.Text() + rand.Text()
	h := hash(secret)
	ref := *acc
	ref.ID, ref.Kind, ref.Hash, ref.ExpiresAt = newID(), models.OAuthRefresh, &h, now.Add(RefreshTokenTTL)
	if err := st.s.store.CreateOAuthTokens(ctx, acc, &ref); err != nil {
		return "", "", time.Time{}, err
	}
	return acc.ID, secret, acc.ExpiresAt, nil
}

// TokenRequestByRefreshToken finds a refresh token to redeem. One already
// replaced is a reuse (a thief's or the victim's copy): the whole family
// is revoked.
func (st storage) TokenRequestByRefreshToken(ctx context.Context, secret string) (op.RefreshTokenRequest, error) {
	if !strings.HasPrefix(secret, RefreshPrefix) {
		return nil, op.ErrInvalidRefreshToken
	}
	t, err := st.s.store.OAuthTokenByHash(ctx, hash(secret))
	if err != nil {
		return nil, err
	}
	now := st.s.now()
	switch {
	case t.RevokedAt != nil:
		return nil, errors.New("refresh token revoked")
	case t.RotatedAt != nil:
		return nil, st.s.reused(ctx, t)
	case !now.Before(t.ExpiresAt):
		return nil, errors.New("refresh token expired")
	}
	if _, err := st.s.resource(ctx, t.Audience); err != nil {
		return nil, err
	}
	if err := st.s.stillGranted(ctx, t.PrincipalID, t.ClientID); err != nil {
		return nil, err
	}
	return &refreshRequest{t: t, scopes: strings.Fields(t.Scopes)}, nil
}

func (st storage) TerminateSession(context.Context, string, string) error { return nil }

// RevokeToken revokes an access token (by id) or a refresh token (by id,
// from GetRefreshTokenInfo) with the rest of its family. An unknown token
// is no error (RFC 7009 §2.2); another client's is refused.
func (st storage) RevokeToken(ctx context.Context, id, _, clientID string) *oidc.Error {
	t, _, err := st.s.store.OAuthTokenByID(ctx, id)
	if errors.Is(err, models.ErrNotFound) {
		return nil
	}
	if err != nil {
		return oidc.ErrServerError().WithParent(err)
	}
	if t.ClientID != clientID {
		return oidc.ErrInvalidClient().WithDescription("the token was not issued to this client")
	}
	where, arg := "id = ?", any(t.ID)
	if t.Kind == models.OAuthRefresh {
		where, arg = "family_id = ?", t.FamilyID
	}
	if _, err := st.s.store.RevokeOAuthTokens(ctx, where, arg, st.s.now()); err != nil {
		return oidc.ErrServerError().WithParent(err)
	}
	st.s.revoked(ctx)
	return nil
}

func (st storage) GetRefreshTokenInfo(ctx context.Context, _ string, secret string) (string, string, error) {
	if !strings.HasPrefix(secret, RefreshPrefix) {
		return "", "", op.ErrInvalidRefreshToken
	}
	t, err := st.s.store.OAuthTokenByHash(ctx, hash(secret))
	if errors.Is(err, models.ErrNotFound) {
		return "", "", op.ErrInvalidRefreshToken
	}
	if err != nil {
		return "", "", err
	}
	return subject(t.PrincipalID), t.ID, nil
}

// signingKey is op's view of the server's RSA key.
type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.key }
func (k signingKey) ID() string                                  { return k.id }

type publicKey struct{ signingKey }

func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.key.PublicKey }

func (st storage) SigningKey(context.Context) (op.SigningKey, error) { return st.s.signing, nil }
func (st storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}
func (st storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{st.s.signing}}, nil
}

func (st storage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	return st.s.client(ctx, id)
}

func (st storage) AuthorizeClientIDSecret(context.Context, string, string) error {
	return errors.New("clients of this server are public: they have no secret")
}

func (st storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

func (st storage) SetUserinfoFromToken(ctx context.Context, info *oidc.UserInfo, tokenID, _, _ string) error {
	t, p, err := st.s.store.OAuthTokenByID(ctx, tokenID)
	if err != nil || usableToken(t, p, st.s.now()) != nil {
		return errors.New("token is not active")
	}
	info.Subject, info.PreferredUsername = subject(p.ID), p.Name
	return nil
}

func (st storage) SetIntrospectionFromToken(ctx context.Context, resp *oidc.IntrospectionResponse, tokenID, _, _ string) error {
	t, p, err := st.s.store.OAuthTokenByID(ctx, tokenID)
	if err != nil || usableToken(t, p, st.s.now()) != nil {
		return errors.New("token is not active")
	}
	resp.Active, resp.Subject, resp.ClientID, resp.Username = true, subject(p.ID), t.ClientID, p.Name
	resp.Scope, resp.Audience = oidc.SpaceDelimitedArray(strings.Fields(t.Scopes)), oidc.Audience{t.Audience}
	resp.Expiration, resp.IssuedAt = oidc.FromTime(t.ExpiresAt), oidc.FromTime(t.CreatedAt)
	resp.TokenType = oidc.BearerToken
	return nil
}

func (st storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (st storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("no client keys: clients of this server are public")
}

func (st storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("the JWT profile grant is not supported")
}

func (st storage) Health(ctx context.Context) error { return st.s.store.Ping(ctx) }

// usableToken says why a token no longer works, nil when it does.
func usableToken(t *models.OAuthToken, p *models.Principal, now time.Time) error {
	switch {
	case t.Kind != models.OAuthAccess:
		return models.ErrUnauthorized.Errorf("that is a refresh token: send the access token")
	case t.RevokedAt != nil:
		return models.ErrUnauthorized.Errorf("the access token was revoked; authorize the client again")
	case !now.Before(t.ExpiresAt):
		return models.ErrUnauthorized.Errorf("the access token expired at %s; refresh it", t.ExpiresAt.Format(time.RFC3339))
	case p == nil || p.CreatedAt.After(t.CreatedAt):
		return models.ErrUnauthorized.Errorf("the access token's principal was deleted")
	case p.DisabledAt != nil:
		return models.ErrUnauthorized.Errorf("principal %s is disabled; ask an admin to enable it", p.Name)
	}
	return nil
}

// tokenFor is the access token a consented request's code gets.
func (s *Server) tokenFor(r *models.OAuthAuthRequest, now time.Time) *models.OAuthToken {
	id := newID()
	return &models.OAuthToken{ID: id, Kind: models.OAuthAccess, GrantID: *r.GrantID, AuthRequestID: r.ID, FamilyID: id,
		PrincipalID: *r.PrincipalID, ClientID: r.ClientID, Scopes: r.Scopes, Audience: r.Resource,
		AuthTime: *r.ConsentedAt, CreatedAt: now, ExpiresAt: now.Add(AccessTokenTTL)}
}

// reused answers a refresh token redeemed twice: its family is revoked.
func (s *Server) reused(ctx context.Context, t *models.OAuthToken) error {
	if _, err := s.store.RevokeOAuthTokens(ctx, "family_id = ?", t.FamilyID, s.now()); err != nil {
		return err
	}
	s.revoked(ctx)
	s.log.WarnContext(ctx, "oauth: a replaced refresh token was used again; its family is revoked", "client_id", t.ClientID, "principal_id", t.PrincipalID)
	return oidc.ErrInvalidGrant().WithDescription("refresh token already used; authorize again")
}

// stillGranted refuses tokens for a grant revoked or a principal disabled
// since the request was consented.
func (s *Server) stillGranted(ctx context.Context, principalID uint, clientID string) error {
	if _, err := s.store.OAuthGrantFor(ctx, principalID, clientID); err != nil {
		return fmt.Errorf("the grant was revoked: %w", err)
	}
	p, err := s.store.PrincipalByID(ctx, principalID)
	if err != nil {
		return err
	}
	if p.DisabledAt != nil {
		return models.ErrUnauthorized.Errorf("principal %s is disabled", p.Name)
	}
	return nil
}
