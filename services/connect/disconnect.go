package connect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"toolbelt/models"
)

// Disconnect deletes principal's connection to server, then revokes its
// tokens at the authorization server (best effort: the connection is gone
// here whatever the server says). ErrNotFound when there was none.
func (s *Service) Disconnect(ctx context.Context, principal *models.Principal, server string) error {
	if principal == nil {
		return models.ErrForbidden.Errorf("only a person disconnects their account")
	}
	var gone *models.Credential
	err := s.d.Store.Audited(ctx, models.AuditConnectionDisconnect, func(tx *models.Store) (string, string, error) {
		var err error
		gone, err = tx.DeleteCredential(ctx, principal.ID, models.CredentialOAuth, server)
		return "upstream:" + server, "disconnected", err
	})
	if err != nil {
		return err
	}
	s.Revoke(ctx, []models.Credential{*gone})
	return nil
}

// Revoke revokes upstream the tokens of connections already deleted here
// (a person disconnecting, a principal disabled or deleted): the refresh
// token first (which ends the grant at most servers), then the access
// token (RFC 7009). Best effort: a failure is logged, without the token.
func (s *Service) Revoke(ctx context.Context, gone []models.Credential) {
	for i := range gone {
		c := &gone[i]
		if c.Kind != models.CredentialOAuth {
			continue
		}
		if err := s.revoke(ctx, c); err != nil {
			s.d.Log.Warn("revoke a connection upstream", "upstream", c.Name, "principal", c.PrincipalID, "err", err.Error())
		}
	}
}

func (s *Service) revoke(ctx context.Context, c *models.Credential) error {
	u, err := s.d.Store.UpstreamByName(ctx, c.Name)
	if err != nil {
		return err
	}
	if u.Auth == nil || u.Auth.RevocationEndpoint == "" {
		return nil // nothing to tell it; the tokens expire on their own
	}
	tok, err := s.open(c)
	if err != nil {
		return err
	}
	cfg, err := s.config(u)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range []struct{ value, hint string }{{tok.RefreshToken, "refresh_token"}, {tok.AccessToken, "access_token"}} {
		if t.value == "" {
			continue
		}
		form := url.Values{"token": {t.value}, "token_type_hint": {t.hint}, "client_id": {cfg.ClientID}}
		if cfg.ClientSecret != "" {
			form.Set("client_secret", cfg.ClientSecret)
		}
		if err := s.post(ctx, u.Auth.RevocationEndpoint, form); err != nil {
			errs = append(errs, fmt.Errorf("revoke the %s: %w", strings.ReplaceAll(t.hint, "_", " "), err))
		}
	}
	return errors.Join(errs...)
}

// post sends form to endpoint and expects a 2xx.
func (s *Service) post(ctx context.Context, endpoint string, form url.Values) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := s.http.Do(req)
	if err != nil {
		return errors.New(reason(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	_ = res.Body.Close()
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("the revocation endpoint answered %s", res.Status)
	}
	return nil
}

// Connection is a person's connection to one OAuth upstream, as their
// console and their REST list show it. Never a token.
type Connection struct {
	Server    string `json:"server" example:"github"`
	Connected bool   `json:"connected"`
	// Account is who they are at the server, as it said ('' unknown).
	Account string     `json:"account,omitempty" example:"alice"`
	Scopes  []string   `json:"scopes,omitempty"`
	Since   *time.Time `json:"since,omitempty"`
	// Error is why the connection stopped working: connect again.
	Error string `json:"error,omitempty"`
	// ConnectURL is where the person connects (again).
	ConnectURL string `json:"connect_url"`
}

// Connections lists, for principal, every upstream that takes a
// per-person OAuth connection, by name, with theirs.
func (s *Service) Connections(ctx context.Context, principal *models.Principal) ([]Connection, error) {
	ups, err := s.d.Store.Upstreams(ctx)
	if err != nil {
		return nil, err
	}
	creds, err := s.d.Store.CredentialsOf(ctx, principal.ID, models.CredentialOAuth)
	if err != nil {
		return nil, err
	}
	mine := make(map[string]*models.Credential, len(creds))
	for i := range creds {
		mine[creds[i].Name] = &creds[i]
	}
	var out []Connection
	for _, u := range ups {
		if u.Auth == nil || u.Auth.Type != models.UpstreamAuthOAuth {
			continue
		}
		c := Connection{Server: u.Name, ConnectURL: s.ConnectURL(u.Name)}
		if cred := mine[u.Name]; cred != nil {
			since := cred.CreatedAt
			c.Connected, c.Account, c.Scopes, c.Since, c.Error = cred.LastError == "", cred.Account, cred.Scopes, &since, cred.LastError
		}
		out = append(out, c)
	}
	return out, nil
}
