package testidp

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/pkg/client/tokenexchange"
	"github.com/zitadel/oidc/v3/pkg/oidc"
)

const upstreamA, upstreamB = "http://127.0.0.1:9/upstream-a", "http://127.0.0.1:9/upstream-b"

// startExchange is start with a confidential client "toolbelt" that may
// exchange tokens issued for resource for tokens for upstreamA only, and
// a user grace beside ada.
func startExchange(t *testing.T) *IDP {
	idp := start(t)
	idp.AddUser(User{Username: "grace", Password: "pw-grace"})
	idp.AddClient(Client{ID: "toolbelt", Secret: "tb-secret", ExchangeFrom: []string{resource}, ExchangeTo: []string{upstreamA}})
	idp.AddClient(Client{ID: "other-app", Resource: "http://127.0.0.1:9/other"})
	return idp
}

func exchange(t *testing.T, idp *IDP, clientID, secret, subject string, tokenType oidc.TokenType, audience ...string) (*oidc.TokenExchangeResponse, error) {
	t.Helper()
	te, err := tokenexchange.NewTokenExchangerClientCredentials(t.Context(), idp.Issuer, clientID, secret,
		tokenexchange.WithHTTPClient(idp.Client()))
	if err != nil {
		t.Fatal(err)
	}
	return tokenexchange.ExchangeToken(t.Context(), te, subject, tokenType, "", "", audience, audience, []string{"repo:read"}, oidc.AccessTokenType)
}

func TestTokenExchangeMintsATokenForTheAudienceAsThePerson(t *testing.T) {
	t.Parallel()
	idp := startExchange(t)
	for _, who := range []string{"ada", "grace"} {
		resp, err := exchange(t, idp, "toolbelt", "tb-secret", idp.AccessToken(t, who, "toolbelt-mcp", "openid"), oidc.AccessTokenType, upstreamA)
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		c := payload(t, resp.AccessToken)
		if c["sub"] != "sub-"+who || c["iss"] != idp.Issuer || c["client_id"] != "toolbelt" || c["scope"] != "repo:read" {
			t.Errorf("%s: claims = %v", who, c)
		}
		if aud, _ := c["aud"].([]any); len(aud) != 1 || aud[0] != upstreamA {
			t.Errorf("%s: aud = %v", who, c["aud"])
		}
		if act, _ := c["act"].(map[string]any); act["sub"] != "toolbelt" {
			t.Errorf("%s: act = %v", who, c["act"])
		}
		if resp.IssuedTokenType != oidc.AccessTokenType || !strings.EqualFold(resp.TokenType, "bearer") || resp.ExpiresIn == 0 {
			t.Errorf("%s: response = %+v", who, resp)
		}
	}
	if ex := idp.Exchanges(); len(ex) != 2 || ex[1].Subject != "sub-grace" || !slices.Equal(ex[1].Resources, []string{upstreamA}) {
		t.Errorf("exchanges = %+v", ex)
	}
}

func TestTokenExchangeRefuses(t *testing.T) {
	t.Parallel()
	idp := startExchange(t)
	ada := idp.AccessToken(t, "ada", "toolbelt-mcp", "openid")
	cases := []struct {
		name, client, secret, subject string
		tokenType                     oidc.TokenType
		audience                      []string
		want                          string
	}{
		{"an audience the client may not ask for", "toolbelt", "tb-secret", ada, oidc.AccessTokenType, []string{upstreamB}, "invalid_target"},
		{"no audience", "toolbelt", "tb-secret", ada, oidc.AccessTokenType, nil, "invalid_target"},
		{"a wrong client secret", "toolbelt", "wrong", ada, oidc.AccessTokenType, []string{upstreamA}, "invalid_client"},
		{"a client without exchange", "console", "console-secret", ada, oidc.AccessTokenType, []string{upstreamA}, "unauthorized_client"},
		{"a subject token for another audience", "toolbelt", "tb-secret", idp.AccessToken(t, "ada", "other-app", "openid"), oidc.AccessTokenType, []string{upstreamA}, "invalid_request"},
		{"an expired subject token", "toolbelt", "tb-secret", idp.Sign(t, idp.Claims("ada", resource, -time.Minute)), oidc.AccessTokenType, []string{upstreamA}, "invalid_request"},
		{"a forged subject token", "toolbelt", "tb-secret", idp.ForgeWithKey(t, idp.Claims("ada", resource, time.Hour), ""), oidc.AccessTokenType, []string{upstreamA}, "invalid_request"},
		{"an unsigned subject token", "toolbelt", "tb-secret", ForgeNone(t, idp.Claims("ada", resource, time.Hour)), oidc.AccessTokenType, []string{upstreamA}, "invalid_request"},
		{"an ID token as subject", "toolbelt", "tb-secret", idp.Token(t, "ada", "console", "openid").Extra("id_token").(string), oidc.IDTokenType, []string{upstreamA}, "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := exchange(t, idp, tc.client, tc.secret, tc.subject, tc.tokenType, tc.audience...)
			var oe *oidc.Error
			if !errors.As(err, &oe) || string(oe.ErrorType) != tc.want {
				t.Fatalf("exchange = %+v, %v; want the error %s", resp, err, tc.want)
			}
		})
	}
	if ex := idp.Exchanges(); len(ex) != 0 {
		t.Errorf("refused exchanges were granted: %+v", ex)
	}
}
