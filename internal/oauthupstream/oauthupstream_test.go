package oauthupstream

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// TestSignInAndCall walks the upstream as a client would: register,
// authorize with PKCE and a resource, sign in as alice, exchange, call
// whoami; the token is refused at another upstream, a refresh token works
// once, and the log shows who called what.
func TestSignInAndCall(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{})
	other := Start(t, Options{})

	const redirect = "http://127.0.0.1:1/callback"
	reg := post(t, s.Origin()+"/register", "application/json", `{"redirect_uris":["`+redirect+`"],"client_name":"test"}`)
	cfg := &oauth2.Config{
		ClientID: reg["client_id"].(string), ClientSecret: reg["client_secret"].(string), RedirectURL: redirect,
		Endpoint: oauth2.Endpoint{AuthURL: s.Origin() + "/authorize", TokenURL: s.Origin() + "/token", AuthStyle: oauth2.AuthStyleInParams},
	}
	verifier := oauth2.GenerateVerifier()
	resource := oauth2.SetAuthURLParam("resource", s.URL)
	back, err := s.SignIn(cfg.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier), resource), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if back.Query().Get("state") != "st" || back.Query().Get("iss") != s.Issuer {
		t.Fatalf("callback %s", back)
	}
	tok, err := cfg.Exchange(t.Context(), back.Query().Get("code"), oauth2.VerifierOption(verifier), resource)
	if err != nil {
		t.Fatal(err)
	}
	if got := Whoami(t, s.URL, tok.AccessToken); got != "alice" {
		t.Fatalf("whoami = %q", got)
	}
	if got := Whoami(t, other.URL, tok.AccessToken); got != "401" {
		t.Fatalf("another upstream answered %q to alice's token", got)
	}
	if _, err := cfg.Exchange(t.Context(), back.Query().Get("code"), oauth2.VerifierOption(verifier), resource); err == nil {
		t.Fatal("a replayed code was exchanged")
	}
	fresh, err := cfg.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	if err != nil {
		t.Fatal(err)
	}
	if fresh.RefreshToken == tok.RefreshToken {
		t.Fatal("the refresh token was not rotated")
	}
	if _, err := cfg.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err == nil {
		t.Fatal("a spent refresh token worked again")
	}
	if calls := s.Calls(); len(calls) != 1 || calls[0] != (Call{User: "alice", Tool: "whoami"}) {
		t.Fatalf("calls = %+v", calls)
	}
	if s.Count("refresh") != 1 || s.Count("refresh_refused") != 1 {
		t.Fatalf("log = %+v", s.Log())
	}
	if strings.Contains(s.Stderr(), tok.AccessToken) {
		t.Fatal("the upstream logged a token")
	}
}

func post(t *testing.T, url, ctype, body string) map[string]any {
	t.Helper()
	res, err := http.Post(url, ctype, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}
