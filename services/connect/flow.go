package connect

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"toolbelt/models"
)

// Start begins principal's connect flow for server: it stores the pending
// flow (the state's hash, the PKCE verifier sealed, the hash of bind,
// which ties the flow to the console session that started it) and
// returns the authorization server's URL to send the browser to, with
// the S256 challenge, the state, the resource (RFC 8707) and the scopes.
func (s *Service) Start(ctx context.Context, principal *models.Principal, server, bind string) (string, error) {
	if principal == nil || bind == "" {
		return "", models.ErrForbidden.Errorf("connecting an account needs a signed-in person's console session")
	}
	u, err := s.oauthUpstream(ctx, server)
	if err != nil {
		return "", err
	}
	cfg, err := s.config(u)
	if err != nil {
		return "", err
	}
	state, verifier := random(), oauth2.GenerateVerifier()
	sealed, err := s.d.Vault.Seal([]byte(verifier), "connect-state", hash(state))
	if err != nil {
		return "", fmt.Errorf("seal the connection's verifier: %w", err)
	}
	at := now()
	if _, err := s.d.Store.DeleteExpiredConnectStates(ctx, at); err != nil {
		s.d.Log.Warn("prune pending connections", "err", err)
	}
	err = s.d.Store.CreateConnectState(ctx, &models.ConnectState{StateHash: hash(state), PrincipalID: principal.ID, Server: u.Name,
		BindHash: hash(bind), Verifier: sealed, CreatedAt: at, ExpiresAt: at.Add(models.ConnectStateTTL)})
	if err != nil {
		return "", err
	}
	return cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", u.Auth.Resource)), nil
}

// Finish ends a connect flow where the authorization server sent the
// browser back: the state must be pending, unexpired, unused and started
// by principal in the session of bind; iss, when the server sends it,
// must be its issuer (RFC 9207). The code is exchanged (with the verifier
// and the resource) and the tokens stored sealed as principal's
// connection to the server, replacing an earlier one.
func (s *Service) Finish(ctx context.Context, principal *models.Principal, bind, state, code, iss string) (*models.Credential, error) {
	if principal == nil || bind == "" || state == "" {
		return nil, models.ErrForbidden.Errorf("finishing a connection needs the console session that started it")
	}
	st, err := s.d.Store.UseConnectState(ctx, hash(state), principal.ID, hash(bind), now())
	if err != nil {
		return nil, err
	}
	u, err := s.oauthUpstream(ctx, st.Server)
	if err != nil {
		return nil, err
	}
	if iss != "" && strings.TrimSuffix(iss, "/") != strings.TrimSuffix(u.Auth.Issuer, "/") {
		return nil, models.ErrForbidden.Errorf("the authorization response comes from %q, not %q, the authorization server of %s (RFC 9207): start connecting again", iss, u.Auth.Issuer, u.Name)
	}
	if code == "" {
		return nil, models.ErrInvalid.Errorf("the authorization server sent no code back: start connecting again")
	}
	verifier, err := s.d.Vault.Open(st.Verifier, "connect-state", st.StateHash)
	if err != nil {
		return nil, fmt.Errorf("open the connection's verifier: %w", err)
	}
	cfg, err := s.config(u)
	if err != nil {
		return nil, err
	}
	tok, err := cfg.Exchange(s.clientContext(ctx, u.Auth.Resource), code, oauth2.VerifierOption(string(verifier)),
		oauth2.SetAuthURLParam("resource", u.Auth.Resource))
	if err != nil {
		return nil, models.ErrForbidden.Errorf("the authorization server of %s refused the code: %s", u.Name, oauthFailure(err))
	}
	c := &models.Credential{PrincipalID: principal.ID, Kind: models.CredentialOAuth, Name: u.Name, Account: account(tok), Scopes: granted(tok, cfg.Scopes)}
	if err := s.seal(c, tok); err != nil {
		return nil, err
	}
	err = s.d.Store.Audited(ctx, models.AuditConnectionConnect, func(tx *models.Store) (string, string, error) {
		return "upstream:" + u.Name, describeConnection(c), tx.PutCredential(ctx, c)
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// describeConnection is an audit detail: as whom, with what scopes.
func describeConnection(c *models.Credential) string {
	d := "connected"
	if c.Account != "" {
		d += " as " + c.Account
	}
	if len(c.Scopes) > 0 {
		d += " with scopes " + strings.Join(c.Scopes, " ")
	}
	return d
}

// sealed is what a connection's Sealed holds.
type sealed struct {
	Access  string    `json:"access_token"`
	Refresh string    `json:"refresh_token,omitempty"`
	Type    string    `json:"token_type,omitempty"`
	Expiry  time.Time `json:"expiry,omitzero"`
}

// seal stores tok in c, sealed for c's owner, kind and name.
func (s *Service) seal(c *models.Credential, tok *oauth2.Token) error {
	plain, err := json.Marshal(sealed{Access: tok.AccessToken, Refresh: tok.RefreshToken, Type: tok.TokenType, Expiry: tok.Expiry})
	if err != nil {
		return err
	}
	c.ExpiresAt = nil
	if !tok.Expiry.IsZero() {
		e := tok.Expiry.UTC()
		c.ExpiresAt = &e
	}
	return s.d.Vault.SealCredential(c, plain)
}

// open reads c's tokens.
func (s *Service) open(c *models.Credential) (*oauth2.Token, error) {
	plain, err := s.d.Vault.OpenCredential(c)
	if err != nil {
		return nil, fmt.Errorf("open the connection of principal %d to %s: %w", c.PrincipalID, c.Name, err)
	}
	var t sealed
	if err := json.Unmarshal(plain, &t); err != nil {
		return nil, fmt.Errorf("read the connection of principal %d to %s: %w", c.PrincipalID, c.Name, err)
	}
	return &oauth2.Token{AccessToken: t.Access, RefreshToken: t.Refresh, TokenType: t.Type, Expiry: t.Expiry}, nil
}

// granted is the scopes the token response names, else those asked for.
func granted(tok *oauth2.Token, asked []string) []string {
	if s, ok := tok.Extra("scope").(string); ok && strings.TrimSpace(s) != "" {
		return strings.Fields(s)
	}
	return asked
}

// account is who the person is at the upstream, for them to recognise
// (never enforced, so read without verifying): the ID token's name for
// them, else the subject of a JWT access token, else unknown.
func account(tok *oauth2.Token) string {
	if id, ok := tok.Extra("id_token").(string); ok {
		if c := claims(id); c != nil {
			for _, k := range []string{"preferred_username", "email", "name", "sub"} {
				if v, ok := c[k].(string); ok && v != "" {
					return clip(v)
				}
			}
		}
	}
	if c := claims(tok.AccessToken); c != nil {
		if v, ok := c["sub"].(string); ok {
			return clip(v)
		}
	}
	return ""
}

// claims are the payload of a JWT, nil when jwt is not one.
func claims(jwt string) map[string]any {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return nil
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil
	}
	var c map[string]any
	if json.Unmarshal(payload, &c) != nil {
		return nil
	}
	return c
}

// clip fits s in Credential.Account, whole characters only.
func clip(s string) string {
	if len(s) > 255 {
		return strings.ToValidUTF8(s[:255], "")
	}
	return s
}
