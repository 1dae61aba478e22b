package authserver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"toolbelt/models"
	"toolbelt/services/access"
)

// Pending is an authorization request as the consent page shows it.
type Pending struct {
	ID           string
	ClientID     string
	ClientName   string
	RedirectHost string
	Resource     string
	// SeenBefore says the person allowed this client before (an
	// unrevoked grant exists).
	SeenBefore bool
	// Scopes are the Toolbelt scopes asked that the person's role allows
	// (what allowing grants); Refused those asked that it does not.
	Scopes, Refused []string
}

// Pending returns the unanswered request id for p to allow or deny.
func (s *Server) Pending(ctx context.Context, id string, p *models.Principal) (*Pending, error) {
	r, err := s.unanswered(ctx, id)
	if err != nil {
		return nil, err
	}
	c, err := s.client(ctx, r.ClientID)
	if err != nil {
		return nil, models.ErrNotFound.Errorf("the client of this request is no longer registered")
	}
	out := &Pending{ID: r.ID, ClientID: c.id, ClientName: c.name, RedirectHost: redirectHost(r.RedirectURI), Resource: r.Resource}
	if out.ClientName == "" {
		out.ClientName = c.id
	}
	_, err = s.store.OAuthGrantFor(ctx, p.ID, c.id)
	out.SeenBefore = err == nil
	asked := strings.Fields(r.Scopes)
	out.Scopes = access.GrantableScopes(p.Role, asked)
	for _, sc := range asked {
		if slices.Contains(Scopes, sc) && !slices.Contains(out.Scopes, sc) {
			out.Refused = append(out.Refused, sc)
		}
	}
	return out, nil
}

func (s *Server) unanswered(ctx context.Context, id string) (*models.OAuthAuthRequest, error) {
	r, err := s.store.OAuthAuthRequestByID(ctx, id, s.now())
	if errors.Is(err, models.ErrNotFound) {
		return nil, models.ErrNotFound.Errorf("this authorization request expired or does not exist; start again from the application")
	}
	if err != nil {
		return nil, err
	}
	if r.ConsentedAt != nil {
		return nil, models.ErrConflict.Errorf("this authorization request was already answered; start again from the application")
	}
	return r, nil
}

// Allow records p's consent to request id (the scopes asked that p's role
// allows) and returns where the browser goes next: op's callback, which
// issues the code to the client's redirect URI.
func (s *Server) Allow(ctx context.Context, id string, p *models.Principal) (string, error) {
	pend, err := s.Pending(ctx, id, p)
	if err != nil {
		return "", err
	}
	if len(pend.Scopes) == 0 {
		return "", models.ErrForbidden.Errorf("the %s role may hold none of the scopes asked (%s)", p.Role, strings.Join(pend.Refused, " "))
	}
	r, err := s.unanswered(ctx, id)
	if err != nil {
		return "", err
	}
	granted := slices.Clone(pend.Scopes)
	for _, sc := range strings.Fields(r.Scopes) {
		if sc == oidc.ScopeOpenID || sc == oidc.ScopeOfflineAccess {
			granted = append(granted, sc)
		}
	}
	g := &models.OAuthGrant{PrincipalID: p.ID, ClientID: pend.ClientID, ClientName: pend.ClientName, Scopes: strings.Join(granted, " "),
		Resource: pend.Resource, CreatedAt: s.now().UTC()}
	err = s.store.Audited(ctx, models.AuditOAuthConsent, func(tx *models.Store) (string, string, error) {
		return fmt.Sprintf("principal:%d", p.ID), fmt.Sprintf("client %s (%s): %s for %s", pend.ClientName, pend.ClientID, strings.Join(pend.Scopes, " "), pend.Resource),
			tx.ConsentOAuthAuthRequest(ctx, id, g, s.now().UTC())
	})
	if err != nil {
		return "", err
	}
	s.log.InfoContext(ctx, "oauth client allowed", "principal", p.Name, "client_id", pend.ClientID, "scopes", pend.Scopes)
	// op's callback, as a path: the browser is on this server already,
	// whichever address of it.
	return strings.TrimPrefix(op.AuthCallbackURL(s.provider)(op.ContextWithIssuer(ctx, s.public), id), s.public), nil
}

// Deny refuses request id and returns the client's redirect URI with
// error=access_denied (the URI was checked against the client's when the
// request was made).
func (s *Server) Deny(ctx context.Context, id string) (string, error) {
	r, err := s.unanswered(ctx, id)
	if err != nil {
		return "", err
	}
	if err := s.store.DeleteOAuthAuthRequest(ctx, id); err != nil {
		return "", err
	}
	u, err := url.Parse(r.RedirectURI)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("error", "access_denied")
	q.Set("error_description", "the person denied the request")
	if r.State != "" {
		q.Set("state", r.State)
	}
	q.Set("iss", s.public)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// RedirectOrigin is the origin request id's code goes to, which the
// consent form may be sent on to (its Content-Security-Policy).
func (s *Server) RedirectOrigin(ctx context.Context, id string) string {
	r, err := s.store.OAuthAuthRequestByID(ctx, id, s.now())
	if err != nil {
		return ""
	}
	u, err := url.Parse(r.RedirectURI)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// Grants are the clients people allowed, unrevoked.
func (s *Server) Grants(ctx context.Context) ([]models.OAuthGrant, error) {
	return s.store.OAuthGrants(ctx)
}

// RevokeGrant revokes a grant and its tokens, on every instance at once.
func (s *Server) RevokeGrant(ctx context.Context, id uint, by *models.Principal) (*models.OAuthGrant, error) {
	var g *models.OAuthGrant
	err := s.store.Audited(ctx, models.AuditOAuthRevoke, func(tx *models.Store) (string, string, error) {
		var err error
		if g, err = tx.RevokeOAuthGrant(ctx, id, s.now().UTC()); err != nil {
			return "", "", err
		}
		return fmt.Sprintf("principal:%d", g.PrincipalID), fmt.Sprintf("client %s (%s)", g.ClientName, g.ClientID), nil
	})
	if err != nil {
		return nil, err
	}
	s.revoked(ctx)
	s.log.InfoContext(ctx, "oauth grant revoked", "principal_id", g.PrincipalID, "client_id", g.ClientID, "by", models.ActorName(by))
	return g, nil
}
