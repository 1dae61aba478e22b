package testidp

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

const resource = "http://127.0.0.1:9/mcp"

func start(t *testing.T) *IDP {
	return Start(t, Options{
		Users: []User{{Username: "ada", Password: "pw-ada", Email: "ada@example.test", Name: "Ada Lovelace", Groups: []string{"tb-admins"}}},
		Clients: []Client{
			{ID: "toolbelt-mcp", Resource: resource},
			{ID: "console", Secret: "console-secret", RedirectURIs: []string{"http://127.0.0.1:9/admin/login/oidc/callback"}},
		},
	})
}

// payload decodes a JWT's claims without verifying it (the verifier's
// tests verify; this checks what the provider put in).
func payload(t *testing.T, jwt string) map[string]any {
	t.Helper()
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", jwt)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAccessTokenIsAJWTForTheResource(t *testing.T) {
	t.Parallel()
	idp := start(t)
	c := payload(t, idp.AccessToken(t, "ada", "toolbelt-mcp", "openid", "tools:read", "tools:call"))
	if c["iss"] != idp.Issuer || c["sub"] != "sub-ada" {
		t.Errorf("iss, sub = %v, %v", c["iss"], c["sub"])
	}
	if aud, _ := c["aud"].([]any); len(aud) != 1 || aud[0] != resource {
		t.Errorf("aud = %v, want [%s]", c["aud"], resource)
	}
	if c["scope"] != "openid tools:read tools:call" || c["email"] != "ada@example.test" || c["preferred_username"] != "ada" {
		t.Errorf("claims = %v", c)
	}
	if g, _ := c["groups"].([]any); len(g) != 1 || g[0] != "tb-admins" {
		t.Errorf("groups = %v", c["groups"])
	}
}

func TestWebClientGetsGroupsInIDTokenAndUserinfo(t *testing.T) {
	t.Parallel()
	idp := start(t)
	idp.SetGroups("sub-ada", "tb-reviewers", "staff")
	tok := idp.Token(t, "ada", "console", "openid", "email", "profile")
	id, _ := tok.Extra("id_token").(string)
	c := payload(t, id)
	if aud, _ := c["aud"].([]any); len(aud) != 1 || aud[0] != "console" {
		t.Errorf("id token aud = %v", c["aud"])
	}
	if g, _ := c["groups"].([]any); len(g) != 2 || c["email"] != "ada@example.test" || c["name"] != "Ada Lovelace" {
		t.Errorf("id token claims = %v", c)
	}
	if strings.Count(tok.AccessToken, ".") == 2 {
		t.Errorf("a client without a resource got a JWT access token")
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, idp.Issuer+"/userinfo", nil)
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err := idp.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var info map[string]any
	if err := json.Unmarshal(body, &info); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("userinfo: %s %s", resp.Status, body)
	}
	if g, _ := info["groups"].([]any); !slices.Contains(g, any("tb-reviewers")) {
		t.Errorf("userinfo = %v", info)
	}
}

func TestLoginRefusesWrongPasswordAndUnknownClient(t *testing.T) {
	t.Parallel()
	idp := start(t)
	if _, err := idp.Login(t.Context(), "ada", "wrong", "toolbelt-mcp", "openid"); err == nil {
		t.Error("a wrong password signed in")
	}
	if _, err := idp.Login(t.Context(), "ada", "pw-ada", "nobody", "openid"); err == nil {
		t.Error("an unknown client signed in")
	}
}

func TestScopesAsArrayAndGroupsClaim(t *testing.T) {
	t.Parallel()
	idp := Start(t, Options{
		GroupsClaim: "roles",
		Users:       []User{{Username: "bo", Password: "pw", Groups: []string{"agents"}}},
		Clients:     []Client{{ID: "entra-like", Resource: resource, ScopesAsArray: true}},
	})
	c := payload(t, idp.AccessToken(t, "bo", "entra-like", "openid", "tools:read"))
	if scp, _ := c["scp"].([]any); len(scp) != 2 || c["scope"] != nil {
		t.Errorf("scp, scope = %v, %v", c["scp"], c["scope"])
	}
	if r, _ := c["roles"].([]any); len(r) != 1 || r[0] != "agents" {
		t.Errorf("roles = %v", c["roles"])
	}
}

func TestForgedTokensLookRight(t *testing.T) {
	t.Parallel()
	idp := start(t)
	claims := idp.Claims("ada", resource, -time.Minute, "tools:read")
	if exp := int64(claims["exp"].(int64)); exp >= time.Now().Unix() {
		t.Errorf("exp %d is not past", exp)
	}
	none := ForgeNone(t, claims)
	if !strings.HasSuffix(none, ".") || payload(t, none)["sub"] != "sub-ada" {
		t.Errorf("alg none token = %q", none)
	}
	for _, tok := range []string{idp.Sign(t, claims), idp.ForgeWithKey(t, claims, ""), idp.ForgeWithKey(t, claims, "other")} {
		if payload(t, tok)["iss"] != idp.Issuer {
			t.Errorf("forged token claims = %v", payload(t, tok))
		}
	}
}
