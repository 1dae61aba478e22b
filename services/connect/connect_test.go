package connect

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"toolbelt/internal/oauthupstream"
	"toolbelt/models"
	"toolbelt/models/modelstest"
)

// TestTwoPeopleActAsThemselves: alice and bob connect their own accounts
// at one upstream; each one's token reaches it as that person (its log
// shows two identities); the tokens are sealed in the database and in no
// log, audit entry or listing.
func TestTwoPeopleActAsThemselves(t *testing.T) {
	t.Parallel()
	store, path := modelstest.SQLite(t)
	f := newFixture(t, store)
	up := oauthupstream.Start(t, oauthupstream.Options{})
	u := f.register(t, "tracker", up, nil)
	if u.Auth.Registration != models.RegistrationDynamic || u.Auth.Resource != up.URL || u.Auth.Issuer != up.Issuer || len(u.AuthSecret) == 0 {
		t.Fatalf("discovered %+v, secret %d bytes", u.Auth, len(u.AuthSecret))
	}
	alice, bob := f.person(t, "alice"), f.person(t, "bob")
	ca := f.connect(t, alice, "tracker", up, "alice")
	f.connect(t, bob, "tracker", up, "bob")
	if ca.Account != "alice" {
		t.Errorf("alice's account = %q", ca.Account)
	}

	var tokens []string
	for _, p := range []*models.Principal{alice, bob} {
		tok, err := f.svc.Token(t.Context(), u, call(p))
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, tok)
		if got := whoami(t, up.URL, tok); got != p.Name {
			t.Errorf("%s's token acts as %q", p.Name, got)
		}
	}
	calls := up.Calls()
	if len(calls) != 2 || calls[0].User != "alice" || calls[1].User != "bob" {
		t.Fatalf("the upstream's log = %+v, want alice then bob", calls)
	}

	carol := f.person(t, "carol")
	if _, err := f.svc.Token(t.Context(), u, call(carol)); !errors.Is(err, ErrNotConnected) || !strings.Contains(err.Error(), f.svc.ConnectURL("tracker")) {
		t.Fatalf("carol, not connected: %v", err)
	}
	if _, err := f.svc.Token(t.Context(), u, call(nil)); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("a call for no one: %v", err)
	}

	conns, err := f.svc.Connections(t.Context(), alice)
	if err != nil || len(conns) != 1 || !conns[0].Connected || conns[0].Account != "alice" || conns[0].Since == nil {
		t.Fatalf("alice's connections = %+v, %v", conns, err)
	}
	entries := audits(t, store, models.AuditConnectionConnect)
	if len(entries) != 2 {
		t.Fatalf("%d connect entries", len(entries))
	}
	secret, err := f.svc.clientSecret(u)
	if err != nil || secret == "" {
		t.Fatal("the registered client's secret does not open", err)
	}
	db := databaseBytes(t, path)
	for _, plain := range append(tokens, secret) {
		if strings.Contains(string(db), plain) || strings.Contains(f.log.String(), plain) || strings.Contains(up.Stderr(), plain) {
			t.Fatal("a token or the client secret is readable in the database or a log")
		}
		for _, e := range entries {
			if strings.Contains(e.Detail, plain) {
				t.Fatal("a token in an audit entry")
			}
		}
	}
}

// databaseBytes is the SQLite database with its write-ahead log.
func databaseBytes(t *testing.T, path string) []byte {
	t.Helper()
	var all []byte
	matches, _ := filepath.Glob(path + "*")
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}
