package access

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
func (a *Accounts) SignIn(ctx context.Context, client, secret string) (*ConsoleSession, error) {
	bad := models.ErrUnauthorized.Errorf("that API key is not valid")
	if len(secret) < len(KeyPrefix)+8 {
		return nil, a.guesses.refuse(ctx, client, bad)
	}
	key, p, err := a.store.KeyByHash(ctx, hashKey(secret))
	if errors.Is(err, models.ErrNotFound) {
		return nil, a.guesses.refuse(ctx, client, bad)
	}
	if err != nil {
		return nil, err
	}
	if err := usable(key, p, time.Now()); err != nil {
		return nil, err
	}
	token := rand.Text() + rand.Text() // 2 × 130 bits
	now := time.Now().UTC()
	cs := &models.ConsoleSession{Hash: hashKey(token), PrincipalID: p.ID, KeyID: key.ID, CreatedAt: now, ExpiresAt: now.Add(ConsoleSessionTTL)}
	if err := a.store.CreateConsoleSession(ctx, cs); err != nil {
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

// SignOut ends the session of a cookie token.
func (a *Accounts) SignOut(ctx context.Context, token string) error {
	return a.store.DeleteConsoleSession(ctx, hashKey(token))
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
