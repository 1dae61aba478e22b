package web_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"toolbelt/app"
	"toolbelt/services/access"
	"toolbelt/services/netpolicy"
)

// Guessing API keys is slowed: past access.KeyGuesses wrong keys from
// one address, its wrong keys are refused 429 with Retry-After, over the
// API and in the console's sign-in; a right key from the same address is
// always accepted (issue 14: 21 wrong keys locked the admin out), and
// other addresses are not affected.
func TestKeyGuessesAreLimited(t *testing.T) {
	app := newTestApp(t)
	from := func(addr, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/api/v1/me", nil)
		req.RemoteAddr = addr + ":40000"
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		app.handler.ServeHTTP(rec, req)
		return rec
	}
	if rec := from("203.0.113.7", app.keys["admin"]); rec.Code != 200 {
		t.Fatalf("right key: %d", rec.Code)
	}
	for i := range access.KeyGuesses().Limit {
		if rec := from("203.0.113.7", "tb_guess"+strconv.Itoa(int(i))+strings.Repeat("0", 60)); rec.Code != 401 {
			t.Fatalf("guess %d: %d, want 401", i, rec.Code)
		}
	}
	wrong := "tb_guess" + strings.Repeat("1", 63)
	rec := from("203.0.113.7", wrong)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "RATE_LIMIT_EXCEEDED") {
		t.Fatalf("after %d wrong keys: %d %v %s", access.KeyGuesses().Limit, rec.Code, rec.Header(), rec.Body)
	}
	// The attacker cannot lock the right key out of the same address.
	for _, key := range []string{app.keys["admin"], app.keys["agent"]} {
		if rec := from("203.0.113.7", key); rec.Code != 200 {
			t.Fatalf("a right key after %d wrong ones from its address: %d %s", access.KeyGuesses().Limit, rec.Code, rec.Body)
		}
	}
	if rec := from("198.51.100.9", wrong); rec.Code != 401 {
		t.Fatalf("another address: %d", rec.Code)
	}
	// X-Forwarded-For does not reset the count.
	req := httptest.NewRequest("GET", "/api/v1/me", nil)
	req.RemoteAddr = "203.0.113.7:40001"
	req.Header.Set("X-Forwarded-For", "192.0.2.200")
	req.Header.Set("Authorization", "Bearer "+wrong)
	rec = httptest.NewRecorder()
	app.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("a forwarded-for header got around the limit: %d", rec.Code)
	}

	// The console's sign-in counts the same guesses (the test server's
	// clients all come from 127.0.0.1).
	b := newBrowserClient(t, app)
	b.get("/admin/login")
	for range access.KeyGuesses().Limit {
		b.post("/admin/login", url.Values{"key": {"tb_wrongwrongwrongwrong"}})
	}
	p := b.post("/admin/login", url.Values{"key": {"tb_wrongwrongwrongwrong"}})
	if p.Status != http.StatusTooManyRequests || !strings.Contains(p.TestID("error-key").Text(), "too many wrong API keys") {
		t.Fatalf("sign-in after guesses: %d %q", p.Status, p.TestID("error-key").Text())
	}
	if p := b.post("/admin/login", url.Values{"key": {app.keys["admin"]}}); p.Status >= 400 {
		t.Fatalf("a right key at sign-in after guesses: %d", p.Status)
	}
}

// Behind a trusted reverse proxy the key-guess limiter counts each client
// the proxy names, not the proxy: one guesser does not lock every client
// out. An address a client puts in X-Forwarded-For itself, before the
// proxy appends the real one, changes nothing; and a peer that is not a
// trusted proxy is counted as itself whatever header it sends.
func TestKeyGuessesBehindTrustedProxy(t *testing.T) {
	app := newTestAppWith(t, hostCaps{}, netpolicy.Policy{}, func(c *app.Config) { c.TrustedProxies = []string{"10.9.0.0/16"} })
	from := func(peer, forwarded, key string) int {
		req := httptest.NewRequest("GET", "/api/v1/me", nil)
		req.RemoteAddr = peer + ":40000"
		if forwarded != "" {
			req.Header.Set("X-Forwarded-For", forwarded)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		app.handler.ServeHTTP(rec, req)
		return rec.Code
	}
	wrong := func(i int) string { return "tb_guess" + strconv.Itoa(i) + strings.Repeat("0", 60) }
	// The guesser varies the address it claims; the proxy appends its own
	// view of the client, which is what counts.
	for i := range int(access.KeyGuesses().Limit) {
		if code := from("10.9.0.2", "192.0.2."+strconv.Itoa(i+1)+", 203.0.113.7", wrong(i)); code != 401 {
			t.Fatalf("guess %d through the proxy: %d, want 401", i, code)
		}
	}
	if code := from("10.9.0.2", "192.0.2.250, 203.0.113.7", wrong(999)); code != http.StatusTooManyRequests {
		t.Fatalf("the guesser behind the proxy after %d guesses: %d, want 429", access.KeyGuesses().Limit, code)
	}
	// Another client behind the same proxy is not locked out, nor is the
	// proxy's own address.
	if code := from("10.9.0.2", "198.51.100.9", wrong(1000)); code != 401 {
		t.Errorf("another client behind the proxy: %d, want 401", code)
	}
	if code := from("10.9.0.3", "", wrong(1001)); code != 401 {
		t.Errorf("the proxy's own request: %d, want 401", code)
	}
	// A peer outside the trusted range is counted as itself: its header
	// is not believed.
	for i := range int(access.KeyGuesses().Limit) {
		from("203.0.113.99", "198.51.100."+strconv.Itoa(i+1), wrong(2000+i))
	}
	if code := from("203.0.113.99", "198.51.100.200", wrong(3000)); code != http.StatusTooManyRequests {
		t.Errorf("an untrusted peer naming a new address each guess: %d, want 429", code)
	}
	if code := from("10.9.0.2", "203.0.113.7", app.keys["admin"]); code != 200 {
		t.Errorf("a right key from the locked-out client: %d", code)
	}
}
