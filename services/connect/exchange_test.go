package connect

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"toolbelt/internal/testidp"
	"toolbelt/internal/testlog"
	"toolbelt/models"
	"toolbelt/services/runners"
)

// toolbeltMCP is the resource people's tokens for Toolbelt are for.
const toolbeltMCP = "http://127.0.0.1:9/mcp"

// exchangeWorld is the organisation's provider with two people, the
// client their agents get Toolbelt tokens with, Toolbelt's confidential
// client allowed to exchange them for upstreams a and b (not c), and the
// three upstream MCP servers, each accepting only tokens for itself.
type exchangeWorld struct {
	idp     *testidp.IDP
	a, b, c *testidp.Upstream
	up      map[*testidp.Upstream]*models.Upstream
	log     *testlog.Buffer
	ex      *Exchanger
}

func newExchangeWorld(t *testing.T) *exchangeWorld {
	t.Helper()
	idp := testidp.Start(t, testidp.Options{
		Users: []testidp.User{{Username: "ada", Password: "pw-ada"}, {Username: "grace", Password: "pw-grace"}},
		Clients: []testidp.Client{
			{ID: "agent", Resource: toolbeltMCP},
			{ID: "other-app", Resource: "http://127.0.0.1:9/other"},
		},
	})
	w := &exchangeWorld{idp: idp, a: idp.StartUpstream(t), b: idp.StartUpstream(t), c: idp.StartUpstream(t), log: &testlog.Buffer{}}
	idp.AddClient(testidp.Client{ID: "toolbelt", Secret: "tb-secret", ExchangeFrom: []string{toolbeltMCP}, ExchangeTo: []string{w.a.URL, w.b.URL}})
	w.up = map[*testidp.Upstream]*models.Upstream{}
	for i, u := range []*testidp.Upstream{w.a, w.b, w.c} {
		w.up[u] = &models.Upstream{ID: uint(i + 1), Name: string(rune('a' + i)), Transport: models.TransportHTTP, URL: u.URL,
			Auth: &models.UpstreamAuth{Type: models.UpstreamAuthExchange, Scopes: []string{"repo:read"}}}
	}
	w.ex = NewExchanger(ExchangerDeps{Issuer: idp.Issuer, ClientID: "toolbelt", ClientSecret: "tb-secret", Client: idp.Client(),
		Log: slog.New(slog.NewJSONHandler(w.log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	return w
}

// exchangeCall is a call of principal id acting with subject (the token it
// authenticated with).
func exchangeCall(id uint, subject string) *runners.Call {
	return &runners.Call{ID: models.NewID(), Principal: &models.Principal{ID: id, Name: "p"}, SubjectToken: subject}
}

func TestExchangeActsAsEachPersonAtTheUpstream(t *testing.T) {
	t.Parallel()
	w := newExchangeWorld(t)
	for i, who := range []string{"ada", "grace"} {
		subject := w.idp.AccessToken(t, who, "agent", "openid")
		token, err := w.ex.Token(t.Context(), w.up[w.a], exchangeCall(uint(i+1), subject))
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		if token == subject {
			t.Fatalf("%s: the person's own token was passed on", who)
		}
		if got, err := w.a.Whoami(t.Context(), token); err != nil || got != "sub-"+who {
			t.Errorf("%s: the upstream saw %q, %v", who, got, err)
		}
	}
	if got := w.a.Subjects(); !slices.Equal(got, []string{"sub-ada", "sub-grace"}) {
		t.Errorf("the upstream's log = %v, want each person once", got)
	}
	ex := w.idp.Exchanges()
	if len(ex) != 2 || !slices.Equal(ex[0].Audience, []string{w.a.URL}) || !slices.Equal(ex[0].Resources, []string{w.a.URL}) ||
		!slices.Equal(ex[0].Scopes, []string{"repo:read"}) || ex[0].Client != "toolbelt" {
		t.Errorf("exchanges = %+v", ex)
	}
}

// A token minted for upstream a is for a alone: b refuses it, and
// Toolbelt asks the provider for b's own; each is then kept per person
// and upstream until shortly before it expires.
func TestExchangedTokenIsForOneUpstreamAndKept(t *testing.T) {
	t.Parallel()
	w := newExchangeWorld(t)
	ada := w.idp.AccessToken(t, "ada", "agent", "openid")
	forA, err := w.ex.Token(t.Context(), w.up[w.a], exchangeCall(1, ada))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.b.Whoami(t.Context(), forA); err == nil || w.b.Refused() == 0 {
		t.Fatalf("upstream b accepted a token minted for a (%v)", err)
	}
	forB, err := w.ex.Token(t.Context(), w.up[w.b], exchangeCall(1, ada))
	if err != nil {
		t.Fatal(err)
	}
	if forB == forA {
		t.Fatal("b got a's token")
	}
	if got, err := w.b.Whoami(t.Context(), forB); err != nil || got != "sub-ada" {
		t.Errorf("b saw %q, %v", got, err)
	}
	if n := len(w.idp.Exchanges()); n != 2 {
		t.Fatalf("%d exchanges, want one per upstream", n)
	}

	again, err := w.ex.Token(t.Context(), w.up[w.a], exchangeCall(1, ada))
	if err != nil || again != forA || len(w.idp.Exchanges()) != 2 {
		t.Errorf("a second call exchanged again (%d exchanges, same token %v, %v)", len(w.idp.Exchanges()), again == forA, err)
	}
	// Another principal with the same token, or the same principal with
	// a new token, is never served another's kept token.
	if other, err := w.ex.Token(t.Context(), w.up[w.a], exchangeCall(2, ada)); err != nil || other == forA {
		t.Errorf("principal 2 got principal 1's kept token (%v)", err)
	}
	if fresh, err := w.ex.Token(t.Context(), w.up[w.a], exchangeCall(1, w.idp.AccessToken(t, "ada", "agent", "openid"))); err != nil || fresh == forA {
		t.Errorf("a new subject token was served the old one's exchange (%v)", err)
	}
	n := len(w.idp.Exchanges())
	w.ex.now = func() time.Time { return time.Now().Add(5 * time.Minute) } // the provider's tokens live 5 minutes
	if later, err := w.ex.Token(t.Context(), w.up[w.a], exchangeCall(1, ada)); err != nil || later == forA || len(w.idp.Exchanges()) != n+1 {
		t.Errorf("an expiring token was handed out again (%v)", err)
	}
}

// Subject tokens the provider must not exchange are refused there, and
// the call fails UPSTREAM_NOT_CONNECTED naming what to do, with no token
// in the message or the log and nothing reaching the upstream.
func TestExchangeRefusesBadSubjectTokens(t *testing.T) {
	t.Parallel()
	w := newExchangeWorld(t)
	cases := map[string]string{
		"for another audience": w.idp.AccessToken(t, "ada", "other-app", "openid"),
		"expired":              w.idp.Sign(t, w.idp.Claims("ada", toolbeltMCP, -time.Minute)),
		"forged":               w.idp.ForgeWithKey(t, w.idp.Claims("ada", toolbeltMCP, time.Hour), ""),
		"unsigned":             testidp.ForgeNone(t, w.idp.Claims("ada", toolbeltMCP, time.Hour)),
	}
	for name, subject := range cases {
		t.Run(name, func(t *testing.T) {
			token, err := w.ex.Token(t.Context(), w.up[w.a], exchangeCall(1, subject))
			var re *runners.Error
			if !errors.As(err, &re) || re.Code != models.CodeUpstreamNotConnected || token != "" {
				t.Fatalf("Token = %q, %v; want UPSTREAM_NOT_CONNECTED", token, err)
			}
			if !strings.Contains(re.Message, w.idp.Issuer) || !strings.Contains(re.Suggestion, "Sign in again") || strings.Contains(re.Message+re.Suggestion, subject) {
				t.Errorf("error = %+v", re)
			}
		})
	}
	if ex := w.idp.Exchanges(); len(ex) != 0 {
		t.Errorf("exchanged: %+v", ex)
	}
	if strings.Contains(w.log.String(), "eyJ") {
		t.Errorf("a token reached the log:\n%s", w.log)
	}
}

// An upstream whose audience the provider does not let Toolbelt ask for
// fails UPSTREAM_ERROR naming the client and audience for the admin.
func TestExchangeForAnAudienceNotAllowed(t *testing.T) {
	t.Parallel()
	w := newExchangeWorld(t)
	_, err := w.ex.Token(t.Context(), w.up[w.c], exchangeCall(1, w.idp.AccessToken(t, "ada", "agent", "openid")))
	var re *runners.Error
	if !errors.As(err, &re) || re.Code != models.CodeUpstream || !strings.Contains(re.Message, "invalid_target") ||
		!strings.Contains(re.Suggestion, `"toolbelt"`) || !strings.Contains(re.Suggestion, w.c.URL) {
		t.Fatalf("Token = %v", err)
	}
	if len(w.c.Subjects()) != 0 || len(w.idp.Exchanges()) != 0 {
		t.Error("something was exchanged or called")
	}
}

// A call without the caller's token (run in the background from its
// record, or made with an API key) cannot be exchanged: it says why and
// what to do, and the provider is not asked.
func TestExchangeWithoutTheCallersToken(t *testing.T) {
	t.Parallel()
	w := newExchangeWorld(t)
	for name, c := range map[string]*runners.Call{"background": exchangeCall(1, ""), "no principal": {ID: "x", SubjectToken: "t"}} {
		_, err := w.ex.Token(t.Context(), w.up[w.a], c)
		var re *runners.Error
		if !errors.As(err, &re) || re.Code != models.CodeUpstreamNotConnected ||
			!strings.Contains(re.Message, "background") || !strings.Contains(re.Suggestion, "without async") {
			t.Errorf("%s: Token = %v", name, err)
		}
	}
	if len(w.idp.Exchanges()) != 0 {
		t.Error("the provider was asked")
	}
}

// A provider that cannot be reached, or does not offer token exchange,
// fails UPSTREAM_ERROR, retryable when it was unreachable.
func TestExchangeProviderUnreachableOrWithoutExchange(t *testing.T) {
	t.Parallel()
	w := newExchangeWorld(t)
	subject := w.idp.AccessToken(t, "ada", "agent", "openid")
	down := NewExchanger(ExchangerDeps{Issuer: "http://127.0.0.1:1", ClientID: "toolbelt", ClientSecret: "tb-secret", Client: w.idp.Client(), Log: slog.New(slog.DiscardHandler)})
	_, err := down.Token(t.Context(), w.up[w.a], exchangeCall(1, subject))
	var re *runners.Error
	if !errors.As(err, &re) || re.Code != models.CodeUpstream || !re.Retryable || !strings.Contains(re.Message, "could not be reached") {
		t.Errorf("unreachable: %v", err)
	}
	notAConfig := &models.Upstream{Name: "plain", URL: w.a.URL}
	if _, err := w.ex.Token(t.Context(), notAConfig, exchangeCall(1, subject)); err == nil || errors.As(err, &re) {
		t.Errorf("an upstream without exchange: %v", err)
	}
}

// Concurrent calls of one person at one upstream make one exchange.
func TestExchangeOncePerKeyUnderConcurrency(t *testing.T) {
	t.Parallel()
	w := newExchangeWorld(t)
	subject := w.idp.AccessToken(t, "ada", "agent", "openid")
	var wg sync.WaitGroup
	tokens := make([]string, 8)
	for i := range tokens {
		wg.Go(func() {
			tokens[i], _ = w.ex.Token(t.Context(), w.up[w.a], exchangeCall(1, subject))
		})
	}
	wg.Wait()
	if tokens[0] == "" || slices.ContainsFunc(tokens, func(s string) bool { return s != tokens[0] }) {
		t.Errorf("tokens differ or are missing")
	}
	if n := len(w.idp.Exchanges()); n != 1 {
		t.Errorf("%d exchanges for one person at one upstream", n)
	}
}
