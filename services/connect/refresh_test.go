package connect

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/oauthupstream"
	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/runners"
)

// rewrite changes p's stored tokens for server with edit, as time (or an
// upstream) would have: a token nearly expired, a refresh token revoked.
func (f *fixture) rewrite(t *testing.T, p *models.Principal, server string, edit func(*oauth2.Token)) *models.Credential {
	t.Helper()
	c, err := f.store.CredentialOf(t.Context(), p.ID, models.CredentialOAuth, server)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := f.svc.open(c)
	if err != nil {
		t.Fatal(err)
	}
	edit(tok)
	if err := f.svc.seal(c, tok); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Refreshed(t.Context(), c, c.Version); err != nil {
		t.Fatal(err)
	}
	return c
}

func expiresIn(d time.Duration) func(*oauth2.Token) {
	return func(t *oauth2.Token) { t.Expiry = time.Now().Add(d) }
}

// TestRefreshOnceAcrossInstances: two instances over one database, many
// callers each, ask for a nearly expired token at once: exactly one
// refresh reaches the upstream, and every caller gets the new token,
// which works.
func TestRefreshOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		one, path := modelstest.SQLite(t)
		two, err := models.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = two.Close() })
		refreshOnce(t, one, two)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dsn := dbtest.Postgres(t)
		var stores [2]*models.Store
		for i := range stores {
			s, err := models.OpenPostgres(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			stores[i] = s
		}
		refreshOnce(t, stores[0], stores[1])
	})
}

func refreshOnce(t *testing.T, one, two *models.Store) {
	f := newFixture(t, one)
	up := oauthupstream.Start(t, oauthupstream.Options{})
	u := f.register(t, "tracker", up, nil)
	alice := f.person(t, "alice")
	f.connect(t, alice, "tracker", up, "alice")
	f.rewrite(t, alice, "tracker", expiresIn(20*time.Second))

	other := newFixture(t, two).svc
	const each = 8
	var wg sync.WaitGroup
	tokens := make([]string, 2*each)
	errs := make([]error, 2*each)
	for i := range tokens {
		svc := f.svc
		if i%2 == 1 {
			svc = other
		}
		wg.Go(func() { tokens[i], errs[i] = svc.Token(context.Background(), u, call(alice)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
		if tokens[i] != tokens[0] {
			t.Fatalf("callers got different tokens")
		}
	}
	if n := up.Count("refresh"); n != 1 {
		t.Fatalf("%d refreshes reached the upstream, want 1 (log %+v)", n, up.Log())
	}
	if got := whoami(t, up.URL, tokens[0]); got != "alice" {
		t.Fatalf("the refreshed token acts as %q", got)
	}
	c, _ := one.CredentialOf(t.Context(), alice.ID, models.CredentialOAuth, "tracker")
	if c.RefreshUntil != nil || c.LastError != "" || c.ExpiresAt == nil || time.Until(*c.ExpiresAt) < 30*time.Minute {
		t.Fatalf("after the refresh: %+v", c)
	}
}

// TestRefreshRefusedMeansReconnect: a refresh token the upstream no
// longer honours (revoked there) ends the connection: the call gets
// ErrNotConnected with the console URL, the row says why, the audit log
// records it without the token, and later calls do not ask again.
func TestRefreshRefusedMeansReconnect(t *testing.T) {
	t.Parallel()
	f, up, u, alice := aliceConnected(t)
	store := f.store
	const revoked = "refresh-token-the-upstream-revoked"
	f.rewrite(t, alice, "tracker", func(t *oauth2.Token) { t.RefreshToken, t.Expiry = revoked, time.Now().Add(-time.Second) })

	for range 2 {
		_, err := f.svc.Token(t.Context(), u, call(alice))
		if !errors.Is(err, ErrNotConnected) || !strings.Contains(err.Error(), f.svc.ConnectURL("tracker")) {
			t.Fatalf("after a refused refresh: %v", err)
		}
	}
	if n := up.Count("refresh_refused"); n != 1 {
		t.Fatalf("the upstream was asked %d times, want once", n)
	}
	conns, _ := f.svc.Connections(t.Context(), alice)
	if conns[0].Connected || !strings.Contains(conns[0].Error, "refused the refresh token") {
		t.Fatalf("alice's connection: %+v", conns[0])
	}
	entries := audits(t, store, models.AuditConnectionRefreshFailed)
	if len(entries) != 1 || strings.Contains(entries[0].Detail, revoked) || strings.Contains(f.log.String(), revoked) {
		t.Fatalf("audit %+v", entries)
	}
	// Connecting again mends it.
	f.connect(t, alice, "tracker", up, "alice")
	if _, err := f.svc.Token(t.Context(), u, call(alice)); err != nil {
		t.Fatal(err)
	}
}

// TestRotationRaceKeepsTheConnection: a caller whose refresh token was
// already spent by another caller's refresh (the upstream rotates them)
// gets invalid_grant, sees the connection moved on, and uses the new
// tokens: the connection is not lost.
func TestRotationRaceKeepsTheConnection(t *testing.T) {
	t.Parallel()
	f, up, u, alice := aliceConnected(t)
	store := f.store
	stale := f.rewrite(t, alice, "tracker", expiresIn(time.Second))
	staleTok, _ := f.svc.open(stale)

	fresh, err := f.svc.Token(t.Context(), u, call(alice)) // the other caller's refresh
	if err != nil {
		t.Fatal(err)
	}
	// This caller read the row before that refresh and refreshes with the
	// spent refresh token.
	access, moved, err := f.svc.refresh(t.Context(), u, stale, staleTok)
	if err != nil || access != "" || moved == nil || moved.Version == stale.Version {
		t.Fatalf("the losing refresh: %q, %+v, %v", access, moved, err)
	}
	if up.Count("refresh_refused") != 1 {
		t.Fatalf("log %+v", up.Log())
	}
	again, err := f.svc.Token(t.Context(), u, call(alice))
	if err != nil || again != fresh {
		t.Fatalf("after the race: %v", err)
	}
	if c, _ := store.CredentialOf(t.Context(), alice.ID, models.CredentialOAuth, "tracker"); c.LastError != "" {
		t.Fatalf("the race marked the connection failed: %q", c.LastError)
	}
	if len(audits(t, store, models.AuditConnectionRefreshFailed)) != 0 {
		t.Fatal("the race was audited as a failed refresh")
	}
}

// TestTransientRefreshFailureKeepsTheConnection: while the authorization
// server does not answer, a still-valid token is used and an expired one
// is a retryable failure; the connection is kept.
func TestTransientRefreshFailureKeepsTheConnection(t *testing.T) {
	t.Parallel()
	f, up, u, alice := aliceConnected(t)
	store := f.store
	up.Stop()

	c := f.rewrite(t, alice, "tracker", expiresIn(20*time.Second))
	old, _ := f.svc.open(c)
	if tok, err := f.svc.Token(t.Context(), u, call(alice)); err != nil || tok != old.AccessToken {
		t.Fatalf("a still-valid token while the server is down: %v", err)
	}
	f.rewrite(t, alice, "tracker", expiresIn(-time.Second))
	_, err := f.svc.Token(t.Context(), u, call(alice))
	var re *runners.Error
	if !errors.As(err, &re) || !re.Retryable || errors.Is(err, ErrNotConnected) {
		t.Fatalf("an expired token while the server is down: %v", err)
	}
	c, _ = store.CredentialOf(t.Context(), alice.ID, models.CredentialOAuth, "tracker")
	if c.LastError != "" || c.RefreshUntil != nil {
		t.Fatalf("a transient failure marked the connection: %+v", c)
	}
}

// TestDisconnectRevokes: disconnecting deletes the connection, revokes
// both tokens upstream (the old access token stops working there at
// once) and is audited; the other person's connection is untouched.
// Revoke does the same for connections deleted with their principal.
func TestDisconnectRevokes(t *testing.T) {
	t.Parallel()
	store, _ := modelstest.Store(t)
	f := newFixture(t, store)
	up := oauthupstream.Start(t, oauthupstream.Options{})
	u := f.register(t, "tracker", up, nil)
	alice, bob := f.person(t, "alice"), f.person(t, "bob")
	f.connect(t, alice, "tracker", up, "alice")
	f.connect(t, bob, "tracker", up, "bob")
	aliceTok, _ := f.svc.Token(t.Context(), u, call(alice))
	bobTok, _ := f.svc.Token(t.Context(), u, call(bob))

	if err := f.svc.Disconnect(t.Context(), alice, "tracker"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Token(t.Context(), u, call(alice)); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("after disconnecting: %v", err)
	}
	if got := whoami(t, up.URL, aliceTok); got != "401" {
		t.Fatalf("alice's revoked token still acts: %q", got)
	}
	if got := whoami(t, up.URL, bobTok); got != "bob" {
		t.Fatalf("bob's connection was touched: %q", got)
	}
	kinds := map[string]int{}
	for _, e := range up.Log() {
		if e.Event == "revoke" {
			kinds[e.Kind]++
		}
	}
	if kinds["refresh"] != 1 || kinds["access"] != 1 {
		t.Fatalf("revocations %v", kinds)
	}
	if len(audits(t, store, models.AuditConnectionDisconnect)) != 1 {
		t.Fatal("the disconnection is not audited")
	}
	if err := f.svc.Disconnect(t.Context(), alice, "tracker"); !errors.Is(err, models.ErrNotFound) {
		t.Fatalf("disconnecting twice: %v", err)
	}

	gone, err := store.DeleteCredentialsOf(t.Context(), bob.ID)
	if err != nil {
		t.Fatal(err)
	}
	f.svc.Revoke(t.Context(), gone)
	if got := whoami(t, up.URL, bobTok); got != "401" {
		t.Fatalf("bob's token after his principal went: %q", got)
	}
}
