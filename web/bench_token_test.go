package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// BenchmarkTokenVsKeyCall makes one cached call through the whole router
// with an API key and with an OAuth access token, alternating in the same
// run, and reports each side's time per call and their ratio: what a
// person's token costs over a key (the target is at most 1.1).
//
// jwt is the OpenID provider's signed access token (verified once, then
// cached by its hash like a key).
func BenchmarkTokenVsKeyCall(b *testing.B) {
	ta, idp := newOIDCApp(b)
	token := idp.AccessToken(b, "ada", "api", "tools:read", "tools:call")
	p, err := ta.store.PrincipalByName(b.Context(), "ada")
	if err != nil {
		// The first token use makes ada's principal.
		ta.keys["ada"] = token
		ta.do(b, "ada", http.MethodGet, "/api/v1/tools", nil)
		if p, err = ta.store.PrincipalByName(b.Context(), "ada"); err != nil {
			b.Fatal(err)
		}
	}
	grantFiles(b, ta, p.ID)
	compareTokenToKey(b, ta, token, "jwt")
}

// compareTokenToKey alternates one cached call by the agent's key and by
// token, and reports each side's time per call and their ratio, the
// token's side named kind.
func compareTokenToKey(b *testing.B, ta *testApp, token, kind string) {
	key := ta.keys["agent"]
	grantFiles(b, ta, ta.ids["agent"])
	call := func(bearer string) time.Duration {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/calls", strings.NewReader(`{"tool":"file_list","session_id":"bench","arguments":{}}`))
		req.Header.Set("Authorization", "Bearer "+bearer)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		start := time.Now()
		ta.handler.ServeHTTP(rec, req)
		took := time.Since(start)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		return took
	}
	// Warm both: the first call runs the tool, the rest are cached.
	call(key)
	call(token)
	var byKey, byToken time.Duration
	n := 0
	for b.Loop() {
		byKey += call(key)
		byToken += call(token)
		n++
	}
	b.ReportMetric(float64(byKey.Nanoseconds())/float64(n), "key-ns/call")
	b.ReportMetric(float64(byToken.Nanoseconds())/float64(n), kind+"-ns/call")
	b.ReportMetric(float64(byToken)/float64(byKey), kind+"/key")
}

// BenchmarkEmbeddedTokenVsKeyCall is BenchmarkTokenVsKeyCall with the
// embedded authorization server's opaque token of an agent (decrypted
// and read once, then cached by its hash like a key).
func BenchmarkEmbeddedTokenVsKeyCall(b *testing.B) {
	a := newOAuthApp(b)
	a.resource = a.base + "/api/v1"
	p := a.person(b)
	clientID, verifier := a.registered(b), oauth2.GenerateVerifier()
	code := p.answer(p.consentPage(a.authorizeURL(clientID, verifier), a.keys["agent"]), "allow").Query().Get("code")
	tok, err := a.redeem(b, clientID, code, verifier)
	if err != nil {
		b.Fatal(err)
	}
	compareTokenToKey(b, a.testApp, tok.AccessToken, "tbat")
}
