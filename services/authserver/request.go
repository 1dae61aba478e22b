package authserver

import (
	"strconv"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"toolbelt/models"
)

// authRequest is a stored authorization request as op reads it.
type authRequest struct{ r *models.OAuthAuthRequest }

var _ op.AuthRequest = authRequest{}

func (a authRequest) GetID() string         { return a.r.ID }
func (a authRequest) GetACR() string        { return "" }
func (a authRequest) GetAMR() []string      { return nil }
func (a authRequest) GetAudience() []string { return []string{a.r.Resource} }
func (a authRequest) GetAuthTime() time.Time {
	if a.r.ConsentedAt == nil {
		return time.Time{}
	}
	return *a.r.ConsentedAt
}
func (a authRequest) GetClientID() string { return a.r.ClientID }
func (a authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	return &oidc.CodeChallenge{Challenge: a.r.CodeChallenge, Method: oidc.CodeChallengeMethod(a.r.CodeChallengeMethod)}
}
func (a authRequest) GetNonce() string                   { return a.r.Nonce }
func (a authRequest) GetRedirectURI() string             { return a.r.RedirectURI }
func (a authRequest) GetResponseType() oidc.ResponseType { return oidc.ResponseTypeCode }
func (a authRequest) GetResponseMode() oidc.ResponseMode { return oidc.ResponseMode(a.r.ResponseMode) }
func (a authRequest) GetScopes() []string                { return strings.Fields(a.r.Scopes) }
func (a authRequest) GetState() string                   { return a.r.State }
func (a authRequest) GetSubject() string {
	if a.r.PrincipalID == nil {
		return ""
	}
	return subject(*a.r.PrincipalID)
}
func (a authRequest) Done() bool { return a.r.ConsentedAt != nil }

// refreshRequest is a refresh token being redeemed.
type refreshRequest struct {
	t      *models.OAuthToken
	scopes []string
}

var _ op.RefreshTokenRequest = (*refreshRequest)(nil)

func (r *refreshRequest) GetAMR() []string            { return nil }
func (r *refreshRequest) GetAudience() []string       { return []string{r.t.Audience} }
func (r *refreshRequest) GetAuthTime() time.Time      { return r.t.AuthTime }
func (r *refreshRequest) GetClientID() string         { return r.t.ClientID }
func (r *refreshRequest) GetScopes() []string         { return r.scopes }
func (r *refreshRequest) GetSubject() string          { return subject(r.t.PrincipalID) }
func (r *refreshRequest) SetCurrentScopes(s []string) { r.scopes = s }

// subject is a principal's id at this issuer: its number.
func subject(principalID uint) string { return strconv.FormatUint(uint64(principalID), 10) }
