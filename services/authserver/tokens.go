package authserver

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"toolbelt/internal/ttlcache"
	"toolbelt/models"
	"toolbelt/services/access"
)

// tokenCacheTTL bounds how long a verified token is trusted without the
// database, as for API keys: revocation clears the cache at once anyway.
const tokenCacheTTL = 10 * time.Second

// Tokens verifies the access tokens the embedded server issues
// (access.TokenVerifier): decrypted to their id, the row says whether they
// still work. Verified tokens are cached for a few seconds, so a call with
// a token costs what a call with a key costs.
type Tokens struct {
	s     *Server
	known *ttlcache.Cache[string, tokenEntry]
	// forgotten counts Forget calls (under mu, with the cache's adds): a
	// token read before one is not kept after it.
	mu        sync.Mutex
	forgotten uint64
}

var _ access.TokenVerifier = (*Tokens)(nil)

type tokenEntry struct {
	token     models.OAuthToken
	principal models.Principal
}

// Forget drops the cached tokens: one revoked here or on another instance,
// or a principal disabled, is refused at once.
func (t *Tokens) Forget() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forgotten++
	t.known.Purge()
}

// Verify returns what an access token of this server allows on resource.
func (t *Tokens) Verify(ctx context.Context, token, resource string) (*access.Grant, error) {
	if !strings.HasPrefix(token, AccessPrefix) {
		return nil, access.ErrNotMine
	}
	key := hash(token)
	e, ok := t.known.Get(key)
	if !ok {
		var err error
		if e, err = t.lookUp(ctx, token, key); err != nil {
			return nil, err
		}
	}
	if err := usableToken(&e.token, &e.principal, t.s.now()); err != nil {
		return nil, err
	}
	if !oauthex.MatchesResource([]string{e.token.Audience}, resource) {
		return nil, models.ErrUnauthorized.Errorf("the access token is for %s, not %s; ask for a token with resource=%s", e.token.Audience, resource, resource)
	}
	p := e.principal
	return &access.Grant{Principal: &p, Scopes: strings.Fields(e.token.Scopes), ClientID: e.token.ClientID, Issuer: t.s.public,
		Subject: subject(p.ID), TokenID: e.token.ID, Expires: e.token.ExpiresAt}, nil
}

var errBadToken = models.ErrUnauthorized.Errorf("invalid access token")

func (t *Tokens) lookUp(ctx context.Context, token, key string) (tokenEntry, error) {
	plain, err := t.s.crypto.Decrypt(token)
	if err != nil {
		return tokenEntry{}, errBadToken
	}
	id, sub, ok := strings.Cut(plain, ":")
	if !ok {
		return tokenEntry{}, errBadToken
	}
	t.mu.Lock()
	before := t.forgotten
	t.mu.Unlock()
	row, p, err := t.s.store.OAuthTokenByID(ctx, id)
	if errors.Is(err, models.ErrNotFound) {
		return tokenEntry{}, errBadToken
	}
	if err != nil {
		return tokenEntry{}, err
	}
	if p == nil {
		return tokenEntry{}, models.ErrUnauthorized.Errorf("the access token's principal was deleted")
	}
	if n, err := strconv.ParseUint(sub, 10, 64); err != nil || uint(n) != row.PrincipalID {
		return tokenEntry{}, errBadToken
	}
	e := tokenEntry{token: *row, principal: *p}
	t.mu.Lock()
	if t.forgotten == before {
		t.known.Add(key, e)
	}
	t.mu.Unlock()
	return e, nil
}
