package access

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"toolbelt/models"
)

// ConsoleSessionTTL is how long a console sign-in lasts.
const ConsoleSessionTTL = 12 * time.Hour

// ConsoleSession is a signed-in console browser: the cookie's token, the
// CSRF token its forms must carry, and who it is.
type ConsoleSession struct {
	// KeyID and KeyLabel name the key the session was opened with.
	KeyID     uint
	KeyLabel  string
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
	token := rand.Text() + rand.Text() // 2 × 130 bits
	now := time.Now().UTC()
	cs := &models.ConsoleSession{Hash: hashKey(token), PrincipalID: p.ID, KeyID: key.ID, CreatedAt: now, ExpiresAt: now.Add(ConsoleSessionTTL)}
	actor.Principal, actor.KeyID, actor.KeyLabel = p, key.ID, cmp.Or(key.Label, key.Prefix)
	ctx = models.WithActor(ctx, actor)
	err = a.store.Audited(ctx, models.AuditSignIn, func(tx *models.Store) (string, string, error) {
		return principalTarget(p.ID), "", tx.CreateConsoleSession(ctx, cs)
	})
	if err != nil {
		return nil, err
	}
	a.touch(ctx, key.ID)
	a.log.InfoContext(ctx, "console sign-in", "principal", p.Name, "key_id", key.ID)
	return &ConsoleSession{Token: token, CSRF: CSRFToken(token), Principal: p, ExpiresAt: cs.ExpiresAt}, nil
}

// ConsoleSession returns the session of a cookie token: unknown, expired,
// signed-out sessions and those whose key was revoked are
// models.ErrUnauthorized.
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
	return &ConsoleSession{KeyID: cs.KeyID, KeyLabel: cs.KeyLabel, Token: token, CSRF: CSRFToken(token), Principal: p, ExpiresAt: cs.ExpiresAt}, nil
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

// PruneConsoleSessions removes expired sessions.
func (a *Accounts) PruneConsoleSessions(ctx context.Context) error {
	_, err := a.store.DeleteExpiredConsoleSessions(ctx, time.Now().UTC())
	return err
}

// CSRFToken is the token a session's forms carry. It is derived from the
// session token (which never leaves the HttpOnly cookie), so it needs no
// storage and a page from another session cannot forge it.
func CSRFToken(sessionToken string) string {
	sum := sha256.Sum256([]byte("toolbelt console csrf\x00" + sessionToken))
	return hex.EncodeToString(sum[:16])
}
