package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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
	b.ReportMetric(float64(byToken.Nanoseconds())/float64(n), "jwt-ns/call")
	b.ReportMetric(float64(byToken)/float64(byKey), "jwt/key")
}
