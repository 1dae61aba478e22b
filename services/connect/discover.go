package connect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"toolbelt/models"
	"toolbelt/services/netpolicy"
)

// Discover fills u.Auth (and u.AuthSecret) with what callers need to reach
// u as a person: for oauth, the server's resource and authorization
// server from its 401 and metadata (RFC 9728, RFC 8414 / OpenID
// discovery), and Toolbelt's client there: the admin's, else its client ID
// metadata document (an https public URL and a server that takes one),
// else one registered dynamically (RFC 7591). Every failure says what is
// missing; nothing is stored here.
func (s *Service) Discover(ctx context.Context, u *models.Upstream) error {
	a := u.Auth
	if a == nil {
		return nil
	}
	if a.Type == models.UpstreamAuthExchange {
		if !s.d.Exchange {
			return refused("auth type exchange needs the organisation's identity provider to mint the tokens: set TOOLBELT_OAUTH=oidc with TOOLBELT_OIDC_CLIENT_ID and TOOLBELT_OIDC_CLIENT_SECRET (Toolbelt asks the provider as that client), or use auth type oauth")
		}
		return nil
	}
	if msg := s.d.Net.CheckURL(u.URL); msg != "" {
		return refused("the outbound-address policy refuses %s: %s", u.URL, msg)
	}
	prm, err := s.resourceMetadata(ctx, u.URL)
	if err != nil {
		return err
	}
	asm, err := s.authServer(ctx, prm)
	if err != nil {
		return err
	}
	a.Resource, a.Issuer = prm.Resource, asm.Issuer
	a.AuthorizationEndpoint, a.TokenEndpoint, a.RevocationEndpoint = asm.AuthorizationEndpoint, asm.TokenEndpoint, asm.RevocationEndpoint
	return s.client(ctx, u, asm)
}

// refused is a discovery failure, at the registration's auth.
func refused(format string, args ...any) error {
	return &models.ValidationError{What: "upstream server", Problems: []models.Problem{{Pointer: "/auth", Message: fmt.Sprintf(format, args...)}}}
}

// resourceMetadata asks the server without a token, expects its 401, and
// reads the protected resource metadata its challenge names (only
// without one, the well-known URL of its path, else of its root), which must name the
// server's own URL as the resource.
func (s *Service) resourceMetadata(ctx context.Context, server string) (*oauthex.ProtectedResourceMetadata, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, server,
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"toolbelt","version":"1"}}}`))
	if err != nil {
		return nil, refused("%q is not a URL", server)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := s.http.Do(req)
	if err != nil {
		return nil, refused("the server did not answer: %s", reason(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	_ = res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		return nil, refused("the server answered %s to a request without a token, not 401 Unauthorized: it does not ask for OAuth; register it without auth", res.Status)
	}
	var candidates []string
	if challenges, err := oauthex.ParseWWWAuthenticate(res.Header.Values("WWW-Authenticate")); err == nil {
		for _, c := range challenges {
			if m := c.Params["resource_metadata"]; c.Scheme == "bearer" && m != "" {
				candidates = append(candidates, m)
			}
		}
	}
	// The challenge's URL is the server's word; the well-known ones are
	// tried only without it (a refused one is not worked around).
	if len(candidates) == 0 {
		su, _ := url.Parse(server)
		if path := strings.Trim(su.Path, "/"); path != "" {
			candidates = append(candidates, su.Scheme+"://"+su.Host+"/.well-known/oauth-protected-resource/"+path)
		}
		candidates = append(candidates, su.Scheme+"://"+su.Host+"/.well-known/oauth-protected-resource")
	}
	var why []string
	for _, c := range candidates {
		if msg := s.d.Net.CheckURL(c); msg != "" {
			why = append(why, fmt.Sprintf("%s: refused by the outbound-address policy: %s", c, msg))
			continue
		}
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, c, server, s.http)
		if err != nil {
			why = append(why, reason(err))
			continue
		}
		if len(prm.AuthorizationServers) == 0 {
			why = append(why, c+" names no authorization server")
			continue
		}
		return prm, nil
	}
	return nil, refused("no protected resource metadata for %s (RFC 9728): %s", server, strings.Join(why, "; "))
}

// authServer reads the metadata of the resource's (first) authorization
// server, which must take PKCE with S256.
func (s *Service) authServer(ctx context.Context, prm *oauthex.ProtectedResourceMetadata) (*oauthex.AuthServerMeta, error) {
	issuer := prm.AuthorizationServers[0]
	if msg := s.d.Net.CheckURL(issuer); msg != "" {
		return nil, refused("the authorization server %s: refused by the outbound-address policy: %s", issuer, msg)
	}
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, s.http)
	if err != nil {
		return nil, refused("the metadata of the authorization server %s: %s", issuer, reason(err))
	}
	if asm == nil {
		return nil, refused("the authorization server %s publishes no metadata (RFC 8414 or OpenID discovery)", issuer)
	}
	if !slices.Contains(asm.CodeChallengeMethodsSupported, "S256") {
		return nil, refused("the authorization server %s does not take PKCE with S256 (it lists %v): Toolbelt connects only with S256", issuer, asm.CodeChallengeMethodsSupported)
	}
	for name, e := range map[string]string{"authorization_endpoint": asm.AuthorizationEndpoint, "token_endpoint": asm.TokenEndpoint,
		"revocation_endpoint": asm.RevocationEndpoint, "registration_endpoint": asm.RegistrationEndpoint} {
		if e == "" && name != "authorization_endpoint" && name != "token_endpoint" {
			continue
		}
		if msg := s.d.Net.CheckURL(e); msg != "" {
			return nil, refused("the authorization server's %s %q: %s", name, e, msg)
		}
	}
	return asm, nil
}

// client fills u's client at the authorization server: the admin's, the
// metadata document, or a dynamic registration.
func (s *Service) client(ctx context.Context, u *models.Upstream, asm *oauthex.AuthServerMeta) error {
	a := u.Auth
	switch {
	case a.ClientID != "":
		a.Registration = models.RegistrationStatic
		_, err := s.clientSecret(u)
		return err
	case asm.ClientIDMetadataDocumentSupported && strings.HasPrefix(s.d.PublicURL, "https://"):
		a.Registration, a.ClientID = models.RegistrationMetadata, s.d.PublicURL+ClientDocumentPath
		return nil
	case asm.RegistrationEndpoint != "":
		method := "none"
		if slices.Contains(asm.TokenEndpointAuthMethodsSupported, "client_secret_post") {
			method = "client_secret_post"
		}
		reg, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{s.RedirectURL()}, TokenEndpointAuthMethod: method, ClientName: "Toolbelt",
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
			Scope: strings.Join(a.Scopes, " "),
		}, s.http)
		if err != nil {
			return refused("dynamic client registration at %s failed: %s", asm.RegistrationEndpoint, registrationFailure(err))
		}
		a.Registration, a.ClientID = models.RegistrationDynamic, reg.ClientID
		u.AuthSecret = nil
		if reg.ClientSecret != "" {
			if u.AuthSecret, err = s.d.Vault.Seal([]byte(reg.ClientSecret), clientAAD(u.Name)...); err != nil {
				return fmt.Errorf("seal the client secret of upstream server %s: %w", u.Name, err)
			}
		}
		return nil
	default:
		hint := ""
		if asm.ClientIDMetadataDocumentSupported {
			hint = " (it takes client ID metadata documents, but Toolbelt's public URL is not https: set TOOLBELT_PUBLIC_URL)"
		}
		return refused("the authorization server %s offers no way for Toolbelt to register%s: register a client there with the redirect URI %s and give auth.client_id (and auth.client_secret as {{env.NAME}})",
			asm.Issuer, hint, s.RedirectURL())
	}
}

// reason is why a request failed, without the URL's query (a client's
// error quotes the URL) and with a refused redirect said plainly.
func reason(err error) string {
	if msg := netpolicy.RedirectRefusal(err); msg != "" {
		return msg
	}
	if errors.Is(err, netpolicy.ErrAddressRefused) {
		return "the outbound-address policy refuses the address: " + err.Error()
	}
	return err.Error()
}

// registrationFailure is why a registration failed, never with the
// response body of a registration that succeeded but did not parse (it
// holds a client secret).
func registrationFailure(err error) string {
	var re *oauthex.ClientRegistrationError
	if errors.As(err, &re) {
		return re.Error()
	}
	if msg := netpolicy.RedirectRefusal(err); msg != "" {
		return msg
	}
	if strings.Contains(err.Error(), "client_secret") {
		return "its answer could not be read"
	}
	return err.Error()
}
