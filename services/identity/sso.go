package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"toolbelt/models"
	"toolbelt/services/access"
)

// SignInTTL is how long a console sign-in may spend at the identity
// provider before its pending record expires.
const SignInTTL = 10 * time.Minute

// providerTimeout bounds each exchange with the provider (discovery, the
// code's redemption with the ID token's keys).
const providerTimeout = 15 * time.Second

// ErrProviderUnavailable is a sign-in that could not start or finish
// because the identity provider did not answer (503: try again, or sign
// in with a key).
var ErrProviderUnavailable = models.NewKind(models.CodeUnavailable, "identity provider unavailable")

// SSOConfig is the console's relying party at the organisation's OpenID
// Connect provider.
type SSOConfig struct {
	// Issuer is the provider's issuer URL; discovery reads
	// Issuer/.well-known/openid-configuration.
	Issuer       string
	ClientID     string
	ClientSecret string
	// Name is the provider as people know it ("Sign in with Name").
	Name string
	// RedirectURL is where the provider sends the browser back: the
	// console's callback under Toolbelt's public URL, registered at the
	// provider as the client's redirect URI.
	RedirectURL string
	// HTTP fetches discovery, the provider's keys and tokens: the
	// outbound policy's client (netpolicy.Policy.Client).
	HTTP *http.Client
}

// SSODeps are what the relying party uses.
type SSODeps struct {
	Config   SSOConfig
	Store    *models.Store
	People   *People
	Accounts *access.Accounts
	Log      *slog.Logger
}

// SSO signs people in to the console through the organisation's OpenID
// Connect provider: authorization code with PKCE (S256), a nonce bound
// into the ID token and a state bound to the pending sign-in. go-oidc
// discovers the provider and verifies ID tokens (signature by the
// provider's published keys, issuer, audience, expiry); x/oauth2 builds
// the request and redeems the code. What the provider says about the
// person is turned into a principal by People.
//
// A pending sign-in is stored (models.OIDCLogin), so any instance can
// finish it, and is consumed by the first callback that names it.
type SSO struct {
	cfg      SSOConfig
	store    *models.Store
	people   *People
	accounts *access.Accounts
	log      *slog.Logger

	// mu guards provider and verifier, made on first use (a constructor
	// starts nothing) and kept, with the provider's keys the verifier
	// caches (refetched when a token names a key it does not know); a
	// failed discovery is retried at the next sign-in.
	mu       sync.Mutex
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
}

// NewSSO returns the relying party; it contacts the provider only when
// someone signs in.
func NewSSO(d SSODeps) *SSO {
	return &SSO{cfg: d.Config, store: d.Store, people: d.People, accounts: d.Accounts, log: d.Log}
}

// Name is the provider's name for the sign-in button: the configured
// one, or the issuer's host.
func (s *SSO) Name() string {
	if s.cfg.Name != "" {
		return s.cfg.Name
	}
	host := strings.TrimPrefix(strings.TrimPrefix(s.cfg.Issuer, "https://"), "http://")
	host, _, _ = strings.Cut(host, "/")
	return host
}

// Departure is a sign-in leaving for the provider: the browser goes to
// URL and keeps Verifier (the PKCE verifier) in an HttpOnly cookie until
// it comes back with State.
type Departure struct {
	URL      string
	State    string
	Verifier string
}

// Start begins a sign-in that returns to next (a console path the caller
// has made safe). It stores the pending sign-in and returns where to send
// the browser.
func (s *SSO) Start(ctx context.Context, next string) (*Departure, error) {
	conf, _, err := s.client(ctx)
	if err != nil {
		return nil, err
	}
	state, nonce, verifier := rand.Text()+rand.Text(), rand.Text()+rand.Text(), oauth2.GenerateVerifier()
	now := time.Now().UTC()
	err = s.store.CreateOIDCLogin(ctx, &models.OIDCLogin{StateHash: digest(state), NonceHash: digest(nonce),
		VerifierHash: digest(verifier), Next: next, CreatedAt: now, ExpiresAt: now.Add(SignInTTL)})
	if err != nil {
		return nil, err
	}
	return &Departure{URL: conf.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)),
		State: state, Verifier: verifier}, nil
}

// Return is the browser back from the provider at the callback.
type Return struct {
	// State and Code are the callback's query parameters; Error and
	// ErrorDescription the provider's refusal (RFC 6749 §4.1.2.1).
	State, Code, Error, ErrorDescription string
	// Verifier is what the browser's cookie holds ("" when none).
	Verifier string
	// Client is the browser's network address, for the audit log.
	Client string
}

// Finish completes a sign-in: the pending sign-in of the state is taken
// (once: a replayed callback finds nothing), the browser must hold its
// PKCE verifier, the code is redeemed with it, the ID token is verified
// and must carry the sign-in's nonce, and People maps the person to an
// enabled principal. It opens a console session and returns it with the
// path the sign-in asked to return to. Every refusal is
// models.ErrUnauthorized (or ErrForbidden when the person is known but
// may not come in) with a message saying what to do, and is audited.
func (s *SSO) Finish(ctx context.Context, r Return) (*access.ConsoleSession, string, error) {
	refuse := func(err error, why string) (*access.ConsoleSession, string, error) {
		return nil, "", s.accounts.RefusePerson(ctx, r.Client, err, why)
	}
	if r.State == "" {
		return refuse(models.ErrUnauthorized.Errorf("the identity provider's answer carries no state; start the sign-in again"), "no state")
	}
	login, err := s.store.TakeOIDCLogin(ctx, digest(r.State), time.Now().UTC())
	if errors.Is(err, models.ErrNotFound) {
		return refuse(models.ErrUnauthorized.Errorf("this sign-in is unknown, was already used or expired; start the sign-in again"), "unknown, used or expired state")
	}
	if err != nil {
		return nil, "", err
	}
	if r.Verifier == "" || subtle.ConstantTimeCompare([]byte(digest(r.Verifier)), []byte(login.VerifierHash)) != 1 {
		return refuse(models.ErrUnauthorized.Errorf("this sign-in was started in another browser; start it again here"), "browser does not hold the sign-in's verifier")
	}
	if r.Error != "" {
		msg := "the identity provider refused the sign-in (" + clipText(r.Error, 64) + ")"
		if r.ErrorDescription != "" {
			msg += ": " + clipText(r.ErrorDescription, 200)
		}
		return refuse(models.ErrUnauthorized.Errorf("%s", msg), "provider answered "+clipText(r.Error, 64))
	}
	if r.Code == "" {
		return refuse(models.ErrUnauthorized.Errorf("the identity provider's answer carries no code; start the sign-in again"), "no code")
	}
	conf, verifier, err := s.client(ctx)
	if err != nil {
		return nil, "", err
	}
	xctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, s.cfg.HTTP), providerTimeout)
	defer cancel()
	tok, err := conf.Exchange(xctx, r.Code, oauth2.VerifierOption(r.Verifier))
	if err != nil {
		s.log.WarnContext(ctx, "redeem the sign-in code", "issuer", s.cfg.Issuer, "err", err)
		return refuse(models.ErrUnauthorized.Errorf("the identity provider did not accept the sign-in's code; start the sign-in again"), "code refused by the provider")
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return refuse(models.ErrUnauthorized.Errorf("the identity provider sent no ID token; check that the client may use the openid scope"), "no id_token")
	}
	idt, err := verifier.Verify(xctx, raw)
	if err != nil {
		s.log.WarnContext(ctx, "verify the ID token", "issuer", s.cfg.Issuer, "err", err)
		return refuse(models.ErrUnauthorized.Errorf("the identity provider's ID token did not verify; start the sign-in again"), "id_token did not verify: "+clipText(err.Error(), 200))
	}
	if idt.Nonce == "" || subtle.ConstantTimeCompare([]byte(digest(idt.Nonce)), []byte(login.NonceHash)) != 1 {
		return refuse(models.ErrUnauthorized.Errorf("the ID token was not issued for this sign-in; start the sign-in again"), "nonce mismatch")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return refuse(models.ErrUnauthorized.Errorf("the ID token's claims are not readable: %v", err), "claims unreadable")
	}
	who, err := s.people.Roles().PersonFromClaims(idt.Issuer, claims)
	if err != nil {
		return refuse(err, "no subject")
	}
	p, err := s.people.Principal(ctx, who)
	if err != nil {
		return refuse(err, fmt.Sprintf("subject %s: %s", clipText(who.Subject, 100), models.Detail(err)))
	}
	id, _, err := s.store.IdentityBySubject(ctx, who.Issuer, who.Subject)
	if err != nil {
		return nil, "", err
	}
	cs, err := s.accounts.SignInPerson(ctx, r.Client, p, id.ID, models.PersonName(who.Name, who.Email, who.Subject, who.Issuer))
	if err != nil {
		return nil, "", err
	}
	return cs, login.Next, nil
}

// client returns the OAuth client and the ID token verifier, discovering
// the provider the first time.
func (s *SSO) client(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.provider == nil {
		dctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, s.cfg.HTTP), providerTimeout)
		defer cancel()
		p, err := oidc.NewProvider(dctx, s.cfg.Issuer)
		if err != nil {
			s.log.WarnContext(ctx, "discover the identity provider", "issuer", s.cfg.Issuer, "err", err)
			return nil, nil, ErrProviderUnavailable.Errorf("the identity provider %s cannot be reached or its discovery document is not valid; try again, or sign in with a key", s.cfg.Issuer)
		}
		keys := oidc.ClientContext(context.Background(), s.cfg.HTTP)
		s.provider, s.verifier = p, p.VerifierContext(keys, &oidc.Config{ClientID: s.cfg.ClientID})
	}
	conf := &oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, RedirectURL: s.cfg.RedirectURL,
		Endpoint: s.provider.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "profile", "email"}}
	return conf, s.verifier, nil
}

// digest is the stored form of a sign-in's secrets: hex SHA-256.
func digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// clipText keeps what a provider sent short in messages and the log.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
