package connect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/oauth2"

	"toolbelt/models"
	"toolbelt/services/runners"
)

// Refresh timing.
const (
	// refreshBefore is how long before expiry a token is refreshed.
	refreshBefore = time.Minute
	// refreshLease is how long one caller holds the right to refresh a
	// connection; a caller that dies holding it delays the others by no
	// more.
	refreshLease = 30 * time.Second
	// refreshWait bounds how long a caller waits for another's refresh.
	refreshWait = 45 * time.Second
	// waitStep is how often a waiting caller reads the connection again.
	waitStep = 50 * time.Millisecond
)

// Token is the access token of the person c acts for (c.Principal) at u,
// refreshed when it expires within a minute: by one caller across the
// cluster (the one that takes the connection's refresh lease), the others
// waiting for the version it writes. An error wrapping ErrNotConnected
// when the person has no connection, or one the server no longer honours;
// a retryable *runners.Error when the authorization server could not be
// reached.
func (s *Service) Token(ctx context.Context, u *models.Upstream, c *runners.Call) (string, error) {
	if c == nil || c.Principal == nil {
		return "", s.notConnected(u.Name, "the call acts for no person, and only a person connects an account")
	}
	cred, err := s.d.Store.CredentialOf(ctx, c.Principal.ID, models.CredentialOAuth, u.Name)
	if errors.Is(err, models.ErrNotFound) {
		return "", s.notConnected(u.Name, "no account is connected")
	}
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(refreshWait)
	for {
		tok, err := s.open(cred)
		if err != nil {
			return "", err
		}
		switch {
		case cred.LastError != "":
			return "", s.notConnected(u.Name, "the connection stopped working ("+cred.LastError+"); connect again")
		case fresh(tok):
			return tok.AccessToken, nil
		case tok.RefreshToken == "" && valid(tok):
			return tok.AccessToken, nil
		case tok.RefreshToken == "":
			return "", s.notConnected(u.Name, "the connection expired and cannot be refreshed")
		}
		won, err := s.d.Store.ClaimRefresh(ctx, cred.ID, cred.Version, time.Now(), time.Now().Add(refreshLease))
		if err != nil {
			return "", err
		}
		if won {
			access, moved, err := s.refresh(ctx, u, cred, tok)
			if err != nil || moved == nil {
				return access, err
			}
			cred = moved
			continue
		}
		if cred, err = s.waitForRefresh(ctx, u, cred, deadline); err != nil {
			if valid(tok) { // another's refresh is slow; the token still works
				return tok.AccessToken, nil
			}
			return "", err
		}
	}
}

// fresh: the token does not expire within refreshBefore.
func fresh(t *oauth2.Token) bool {
	return t.Expiry.IsZero() || time.Until(t.Expiry) > refreshBefore
}

// valid: the token has not expired yet.
func valid(t *oauth2.Token) bool { return t.Expiry.IsZero() || time.Until(t.Expiry) > 0 }

// waitForRefresh waits until the connection moves past cred's version or
// its lease ends (the refresher died: the caller tries itself), and
// returns it as read then.
func (s *Service) waitForRefresh(ctx context.Context, u *models.Upstream, cred *models.Credential, deadline time.Time) (*models.Credential, error) {
	t := time.NewTicker(waitStep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
		cur, err := s.d.Store.CredentialByID(ctx, cred.ID)
		if errors.Is(err, models.ErrNotFound) {
			return nil, s.notConnected(u.Name, "the account was disconnected")
		}
		if err != nil {
			return nil, err
		}
		if cur.Version != cred.Version || cur.RefreshUntil == nil || !cur.RefreshUntil.After(time.Now()) {
			return cur, nil
		}
		if time.Now().After(deadline) {
			return nil, unavailable(u.Name, "another instance's refresh of the token did not finish in time")
		}
	}
}

// refresh refreshes cred (holding its lease) and returns the new access
// token; or, when the connection moved on meanwhile (another caller's
// refresh, whose rotation made the upstream refuse this one's refresh
// token: a race, not a lost connection; or the person connecting again),
// the connection as it is now, to read again; or, after a transient
// failure, the old token while it still works.
func (s *Service) refresh(ctx context.Context, u *models.Upstream, cred *models.Credential, tok *oauth2.Token) (string, *models.Credential, error) {
	cfg, err := s.config(u)
	if err != nil {
		_ = s.d.Store.RefreshFailed(ctx, cred.ID, cred.Version, "")
		return "", nil, err
	}
	next, err := cfg.TokenSource(s.clientContext(ctx, u.Auth.Resource), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	if err != nil {
		cur, rerr := s.d.Store.CredentialByID(ctx, cred.ID)
		if rerr == nil && cur.Version != cred.Version {
			return "", cur, nil
		}
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode == "invalid_grant" {
			why := "the authorization server refused the refresh token: " + oauthFailure(err)
			ferr := s.d.Store.Audited(ctx, models.AuditConnectionRefreshFailed, func(tx *models.Store) (string, string, error) {
				return "upstream:" + u.Name, fmt.Sprintf("principal %d: %s", cred.PrincipalID, why), tx.RefreshFailed(ctx, cred.ID, cred.Version, why)
			})
			if ferr != nil {
				return "", nil, ferr
			}
			s.d.Log.Warn("connection refresh refused", "upstream", u.Name, "principal", cred.PrincipalID, "reason", oauthFailure(err))
			return "", nil, s.notConnected(u.Name, "the authorization server no longer honours the connection; connect again")
		}
		_ = s.d.Store.RefreshFailed(ctx, cred.ID, cred.Version, "")
		s.d.Log.Warn("connection refresh failed", "upstream", u.Name, "principal", cred.PrincipalID, "reason", oauthFailure(err))
		if valid(tok) {
			return tok.AccessToken, nil, nil
		}
		return "", nil, unavailable(u.Name, "its authorization server could not refresh the token: "+oauthFailure(err))
	}
	if next.RefreshToken == "" {
		next.RefreshToken = tok.RefreshToken
	}
	version := cred.Version
	updated := *cred
	updated.Scopes = granted(next, cred.Scopes)
	if err := s.seal(&updated, next); err != nil {
		return "", nil, err
	}
	err = s.d.Store.Refreshed(ctx, &updated, version)
	if errors.Is(err, models.ErrCredentialMoved) {
		cur, err := s.d.Store.CredentialByID(ctx, cred.ID)
		if errors.Is(err, models.ErrNotFound) {
			return "", nil, s.notConnected(u.Name, "the account was disconnected")
		}
		return "", cur, err
	}
	if err != nil {
		return "", nil, err
	}
	return next.AccessToken, nil, nil
}

// unavailable is a retryable failure to get a token.
func unavailable(server, why string) error {
	return &runners.Error{Code: models.CodeUpstream, Retryable: true,
		Message:    fmt.Sprintf("the token for the upstream server %s could not be refreshed: %s", server, why),
		Suggestion: "Retry in a moment; the person's connection is kept."}
}
