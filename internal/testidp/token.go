package testidp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// AccessToken signs a user in to a client without a browser and returns
// the access token (a JWT with aud = the client's Resource when it has
// one). The test fails if the provider refuses.
func (idp *IDP) AccessToken(t testing.TB, username, clientID string, scopes ...string) string {
	t.Helper()
	return idp.Token(t, username, clientID, scopes...).AccessToken
}

// Token is AccessToken returning the whole token response (its
// "id_token" is in Extra when "openid" was asked for).
func (idp *IDP) Token(t testing.TB, username, clientID string, scopes ...string) *oauth2.Token {
	t.Helper()
	u := idp.user(username)
	if u == nil {
		t.Fatalf("testidp: no user %q", username)
	}
	tok, err := idp.Login(t.Context(), username, u.Password, clientID, scopes...)
	if err != nil {
		t.Fatalf("testidp: %v", err)
	}
	return tok
}

// Login runs the authorization code flow with PKCE (S256) as a browser
// would, through the provider's real endpoints and login form, with a
// cookie jar: authorize → login form → callback → redirect with a code →
// token endpoint. It stops at HelperRedirectURI instead of following it.
// A refused login or request is an error naming what the provider said.
func (idp *IDP) Login(ctx context.Context, username, password, clientID string, scopes ...string) (*oauth2.Token, error) {
	c := idp.client(clientID)
	if c == nil {
		return nil, fmt.Errorf("no client %q", clientID)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	browser := &http.Client{
		Jar: jar,
		CheckRedirect: func(r *http.Request, _ []*http.Request) error {
			if strings.HasPrefix(r.URL.String(), HelperRedirectURI) {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	conf, err := idp.oauth2Config(ctx, browser, c, scopes)
	if err != nil {
		return nil, err
	}
	verifier, state := oauth2.GenerateVerifier(), rand.Text()

	page, err := get(ctx, browser, conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)))
	if err != nil {
		return nil, err
	}
	page.Body.Close()
	if page.StatusCode != http.StatusOK || page.Request.URL.Path != loginPath {
		return nil, fmt.Errorf("authorize: %s at %s", page.Status, page.Request.URL)
	}
	form := url.Values{
		"id":       {page.Request.URL.Query().Get("authRequestID")},
		"username": {username},
		"password": {password},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, idp.Issuer+loginPath, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := browser.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return nil, fmt.Errorf("login as %q: %s", username, resp.Status)
	}
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return nil, err
	}
	q := back.Query()
	if e := q.Get("error"); e != "" {
		return nil, fmt.Errorf("authorize: %s: %s", e, q.Get("error_description"))
	}
	if q.Get("state") != state {
		return nil, errors.New("authorize: state changed on the way back")
	}
	return conf.Exchange(context.WithValue(ctx, oauth2.HTTPClient, browser), q.Get("code"), oauth2.VerifierOption(verifier))
}

// oauth2Config reads the provider's endpoints from its discovery document.
func (idp *IDP) oauth2Config(ctx context.Context, hc *http.Client, c *Client, scopes []string) (*oauth2.Config, error) {
	resp, err := get(ctx, hc, idp.Issuer+"/.well-known/openid-configuration")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var d struct {
		Authorization string `json:"authorization_endpoint"`
		Token         string `json:"token_endpoint"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	style := oauth2.AuthStyleInHeader
	if c.Secret == "" {
		style = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{
		ClientID:     c.ID,
		ClientSecret: c.Secret,
		Endpoint:     oauth2.Endpoint{AuthURL: d.Authorization, TokenURL: d.Token, AuthStyle: style},
		RedirectURL:  HelperRedirectURI,
		Scopes:       scopes,
	}, nil
}

// get fetches a URL and reads nothing: callers read or close the body.
func get(ctx context.Context, hc *http.Client, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	return hc.Do(req)
}
