package connect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/oauth2"

	"toolbelt/models"
	"toolbelt/services/tooldef"
)

// config is the OAuth client of Toolbelt at u's authorization server.
func (s *Service) config(u *models.Upstream) (*oauth2.Config, error) {
	a := u.Auth
	secret, err := s.clientSecret(u)
	if err != nil {
		return nil, err
	}
	return &oauth2.Config{
		ClientID: a.ClientID, ClientSecret: secret, RedirectURL: s.RedirectURL(), Scopes: a.Scopes,
		// client_secret_post: what MCP authorization servers take (the
		// TypeScript SDK's takes nothing else); a public client sends its
		// id the same way.
		Endpoint: oauth2.Endpoint{AuthURL: a.AuthorizationEndpoint, TokenURL: a.TokenEndpoint, AuthStyle: oauth2.AuthStyleInParams},
	}, nil
}

// clientSecret is the secret of Toolbelt's client at u's authorization
// server: a configured secret an admin referenced, or the one dynamic
// registration issued (sealed); "" for a public client.
func (s *Service) clientSecret(u *models.Upstream) (string, error) {
	a := u.Auth
	if len(u.AuthSecret) > 0 {
		plain, err := s.d.Vault.Open(u.AuthSecret, clientAAD(u.Name)...)
		if err != nil {
			return "", fmt.Errorf("open the client secret of upstream server %s: %w (was the vault key changed?)", u.Name, err)
		}
		return string(plain), nil
	}
	if a.ClientSecret == "" {
		return "", nil
	}
	m := tooldef.Placeholder.FindStringSubmatch(a.ClientSecret)
	name, ok := "", false
	if m != nil {
		name, ok = strings.CutPrefix(m[1], "env.")
	}
	v, set := s.d.Secrets[name]
	if !ok || !set {
		return "", models.ErrInvalid.Errorf("the client secret of upstream server %s, %s, is not a configured secret: list it in TOOLBELT_SECRETS", u.Name, a.ClientSecret)
	}
	return v, nil
}

// clientContext makes x/oauth2 use the service's client, which also
// sends resource with a refresh (x/oauth2 sends no parameter of its own
// there), so a refreshed token stays bound to the server (RFC 8707).
func (s *Service) clientContext(ctx context.Context, resource string) context.Context {
	c := *s.http
	c.Transport = withResource{next: transport(s.http), resource: resource}
	return context.WithValue(ctx, oauth2.HTTPClient, &c)
}

func transport(c *http.Client) http.RoundTripper {
	if c.Transport != nil {
		return c.Transport
	}
	return http.DefaultTransport
}

// withResource adds resource to refresh-token grants that lack it.
type withResource struct {
	next     http.RoundTripper
	resource string
}

func (t withResource) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.resource == "" || req.Method != http.MethodPost || req.Body == nil ||
		!strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return t.next.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	form, err := url.ParseQuery(string(body))
	if err == nil && form.Get("grant_type") == "refresh_token" && form.Get("resource") == "" {
		form.Set("resource", t.resource)
		body = []byte(form.Encode())
	}
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(strings.NewReader(string(body)))
	req.ContentLength = int64(len(body))
	return t.next.RoundTrip(req)
}

// ClientDocument is Toolbelt's client ID metadata document: its URL is
// its client id at authorization servers that take such documents.
func (s *Service) ClientDocument() []byte {
	doc, _ := json.Marshal(map[string]any{
		"client_id":                  s.d.PublicURL + ClientDocumentPath,
		"client_name":                "Toolbelt",
		"client_uri":                 s.d.PublicURL,
		"redirect_uris":              []string{s.RedirectURL()},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
	})
	return doc
}

// oauthFailure says why an authorization server refused, without what
// the refused request carried: the error code and description only.
func oauthFailure(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		msg := re.ErrorCode
		if msg == "" {
			msg = http.StatusText(re.Response.StatusCode)
		}
		if re.ErrorDescription != "" {
			msg += ": " + re.ErrorDescription
		}
		return msg
	}
	return reason(err)
}
