package access

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"toolbelt/models"
)

// ConsoleSessionTTL is how long a console sign-in lasts.
const ConsoleSessionTTL = 12 * time.Hour

// ConsoleSession is a signed-in console browser: the cookie's token, the
// CSRF token its forms must carry, and who it is.
type ConsoleSession struct {
	// KeyID and KeyLabel name the key the session was opened with.
	KeyID    uint
	KeyLabel string
	// Person names who the identity provider signed in (KeyID 0), as
	// models.Actor.Person; empty for a key's session.
	Person    string
	Token     string
	CSRF      string
	Principal *models.Principal
	ExpiresAt time.Time
}

// SignIn opens a console session with an API key, for a browser at
// client (its network address). A wrong or revoked key is
// models.ErrUnauthorized, with no hint of which; wrong keys count against
// the client's guesses as in Authenticate (a right key is always let in).
// The audit log records each sign-in, and each refused key up to the
// client's guess limit (a flood of guesses past it writes nothing more).
func (a *Accounts) SignIn(ctx context.Context, client, secret string) (*ConsoleSession, error) {
	actor := models.Actor{Via: models.ViaConsole, ClientIP: client, RequestID: models.ActorOf(ctx).RequestID}
	ctx = models.WithActor(ctx, actor)
	bad := models.ErrUnauthorized.Errorf("that API key is not valid")
	if len(secret) < len(KeyPrefix)+8 {
		return nil, a.refuseSignIn(ctx, client, bad, true, "not a key")
	}
	key, p, err := a.store.KeyByHash(ctx, hashKey(secret))
	if errors.Is(err, models.ErrNotFound) {
		return nil, a.refuseSignIn(ctx, client, bad, true, "unknown key")
	}
	if err != nil {
		return nil, err
	}
	if err := usable(key, p, time.Now()); err != nil {
		return nil, a.refuseSignIn(ctx, client, err, false, fmt.Sprintf("key %d of principal %d: %v", key.ID, p.ID, err))
	}
	actor.Principal, actor.KeyID, actor.KeyLabel = p, key.ID, cmp.Or(key.Label, key.Prefix)
	cs, err := a.openSession(models.WithActor(ctx, actor), &models.ConsoleSession{PrincipalID: p.ID, KeyID: key.ID}, "")
	if err != nil {
		return nil, err
	}
	a.touch(ctx, key.ID)
	a.log.InfoContext(ctx, "console sign-in", "principal", p.Name, "key_id", key.ID)
	return cs, nil
}

// SignInPerson opens a console session for a person the identity
// provider signed in, already resolved to an enabled principal p and
// the identity identityID (services/identity does both; it checks what
// the provider said, this only opens the session). person names them
// (models.PersonName) in the audit log of the sign-in and of all the
// session does.
func (a *Accounts) SignInPerson(ctx context.Context, client string, p *models.Principal, identityID uint, person string) (*ConsoleSession, error) {
	actor := models.Actor{Principal: p, Via: models.ViaConsole, ClientIP: client, RequestID: models.ActorOf(ctx).RequestID, Person: person}
	cs, err := a.openSession(models.WithActor(ctx, actor), &models.ConsoleSession{PrincipalID: p.ID, IdentityID: &identityID, Person: person}, models.SignedInSSO)
	if err != nil {
		return nil, err
	}
	a.log.InfoContext(ctx, "console sign-in", "principal", p.Name, "identity_id", identityID, "via", models.SignedInSSO)
	return cs, nil
}

// openSession stores a new session cs (its principal and credential
// set) with the audit entry of the sign-in, whose detail says how.
func (a *Accounts) openSession(ctx context.Context, cs *models.ConsoleSession, how string) (*ConsoleSession, error) {
	token := rand.Text() + rand.Text() // 2 × 130 bits
	now := time.Now().UTC()
	cs.Hash, cs.CreatedAt, cs.ExpiresAt = hashKey(token), now, now.Add(ConsoleSessionTTL)
	err := a.store.Audited(ctx, models.AuditSignIn, func(tx *models.Store) (string, string, error) {
		return principalTarget(cs.PrincipalID), how, tx.CreateConsoleSession(ctx, cs)
	})
	if err != nil {
		return nil, err
	}
	actor := models.ActorOf(ctx)
	return &ConsoleSession{KeyID: cs.KeyID, KeyLabel: actor.KeyLabel, Person: cs.Person, Token: token, CSRF: CSRFToken(token),
		Principal: actor.Principal, ExpiresAt: cs.ExpiresAt}, nil
}

// ConsoleSession returns the session of a cookie token: unknown, expired,
// signed-out sessions, those whose key was revoked and those of a
// disabled principal are models.ErrUnauthorized.
func (a *Accounts) ConsoleSession(ctx context.Context, token string) (*ConsoleSession, error) {
	if token == "" {
		return nil, models.ErrUnauthorized.Errorf("not signed in")
	}
	cs, p, err := a.store.ConsoleSessionByHash(ctx, hashKey(token), time.Now().UTC())
	if errors.Is(err, models.ErrNotFound) {
		return nil, models.ErrUnauthorized.Errorf("the session ended; sign in again")
	}
	if err != nil {
		return nil, err
	}
	return &ConsoleSession{KeyID: cs.KeyID, KeyLabel: cs.KeyLabel, Person: cs.Person, Token: token, CSRF: CSRFToken(token), Principal: p, ExpiresAt: cs.ExpiresAt}, nil
}

// RefusePerson records a sign-in through the identity provider that was
// refused (why says what for the audit log, never a token or code) and
// answers err. It is not counted as a guess: the provider, not the
// client, chose who came back.
func (a *Accounts) RefusePerson(ctx context.Context, client string, err error, why string) error {
	actor := models.ActorOf(ctx)
	actor.Via, actor.ClientIP = models.ViaConsole, client
	return a.refuseSignIn(models.WithActor(ctx, actor), client, err, false, models.SignedInSSO+": "+why)
}

// refuseSignIn records a refused sign-in and answers err. A guess (a
// key that is none of ours) counts against the client's guesses; once
// they are spent the answer is TooManyGuessesError, recorded no more:
// the limit, not the log, answers a flood.
func (a *Accounts) refuseSignIn(ctx context.Context, client string, err error, guess bool, why string) error {
	if guess {
		if err = a.guesses.refuse(ctx, client, err); !errors.Is(err, models.ErrUnauthorized) {
			return err
		}
	}
	if aerr := a.store.Audited(ctx, models.AuditSignInFailed, func(*models.Store) (string, string, error) {
		return "console", why, nil
	}); aerr != nil {
		a.log.WarnContext(ctx, "audit a refused sign-in", "err", aerr)
	}
	return err
}

// SignOut ends the session of a cookie token.
func (a *Accounts) SignOut(ctx context.Context, token string) error {
	return a.store.Audited(ctx, models.AuditSignOut, func(tx *models.Store) (string, string, error) {
		target := "console"
		if p := models.ActorOf(ctx).Principal; p != nil {
			target = principalTarget(p.ID)
		}
		return target, "", tx.DeleteConsoleSession(ctx, hashKey(token))
	})
}

// maxListedSessions bounds the console sessions Access lists.
const maxListedSessions = 1000

// ConsoleSessions lists the open console sessions, newest first, by
// principal id: what Access shows an admin, who may end any of them.
func (a *Accounts) ConsoleSessions(ctx context.Context) (map[uint][]models.ConsoleSession, error) {
	all, err := a.store.ActiveConsoleSessions(ctx, time.Now().UTC(), maxListedSessions)
	if err != nil {
		return nil, err
	}
	out := map[uint][]models.ConsoleSession{}
	for _, cs := range all {
		out[cs.PrincipalID] = append(out[cs.PrincipalID], cs)
	}
	return out, nil
}

// EndConsoleSession ends the session of hash (as ConsoleSessions lists
// it) of principal principalID, for an admin by: its next request must
// sign in again, on every instance (sessions are read from the database
// at each request). Audited as a sign-out of that principal.
func (a *Accounts) EndConsoleSession(ctx context.Context, principalID uint, hash string, by *models.Principal) error {
	if len(hash) != 64 || strings.Trim(hash, "0123456789abcdef") != "" {
		return models.ErrInvalid.Errorf("session %q: give the session's id as the Access page lists it", hash)
	}
	return a.store.Audited(ctx, models.AuditSignOut, func(tx *models.Store) (string, string, error) {
		return principalTarget(principalID), "ended by " + models.ActorName(by), tx.DeleteConsoleSessionOf(ctx, principalID, hash)
	})
}

// PruneConsoleSessions removes expired sessions, and sign-ins through
// the identity provider that never came back.
func (a *Accounts) PruneConsoleSessions(ctx context.Context) error {
	now := time.Now().UTC()
	if _, err := a.store.DeleteExpiredConsoleSessions(ctx, now); err != nil {
		return err
	}
	_, err := a.store.DeleteExpiredOIDCLogins(ctx, now)
	return err
}

// CSRFToken is the token a session's forms carry. It is derived from the
// session token (which never leaves the HttpOnly cookie), so it needs no
// storage and a page from another session cannot forge it.
func CSRFToken(sessionToken string) string {
	sum := sha256.Sum256([]byte("toolbelt console csrf\x00" + sessionToken))
	return hex.EncodeToString(sum[:16])
}
