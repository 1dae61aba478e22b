// Package access decides who may do what: principals and their API keys
// (hashed, never stored in plain text), console sessions, the grants of
// agents, and the Casbin RBAC policies derived from the route table.
package access

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"toolbelt/models"
	"toolbelt/services/tooldef"
)

// KeyPrefix starts every API key Toolbelt issues, so leaked keys are easy
// to recognise (and for secret scanners to find).
const KeyPrefix = "tb_"

// MinAdminKeyLen is the shortest TOOLBELT_ADMIN_KEY accepted.
const MinAdminKeyLen = 24

var principalNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Accounts manages principals and their API keys, and authenticates
// requests.
type Accounts struct {
	store *models.Store
	authz *Authz
	log   *slog.Logger

	mu      sync.Mutex
	touched map[uint]time.Time // key id → last recorded use, to limit writes
	// known caches key hash → principal for a few seconds, so a burst of
	// requests does not query the database each time; revoking a key
	// clears it at once.
	known *expirable.LRU[string, authEntry]
	// guesses slows brute-forcing of keys, per client address.
	guesses *guessLimiter
	// revoked run after a key is revoked (other instances are told).
	revoked []func(context.Context)
}

// OnRevoke registers fn to run after every key revocation.
func (a *Accounts) OnRevoke(fn func(context.Context)) { a.revoked = append(a.revoked, fn) }

// ForgetKeys drops the cached authentications, so a key revoked on
// another instance is refused here at once.
func (a *Accounts) ForgetKeys() { a.known.Purge() }

type authEntry struct {
	keyID     uint
	principal models.Principal
}

// authCacheTTL bounds how long a cached authentication is trusted.
const authCacheTTL = 10 * time.Second

// NewAccounts returns the account service.
func NewAccounts(store *models.Store, authz *Authz, log *slog.Logger) *Accounts {
	return &Accounts{store: store, authz: authz, log: log, touched: map[uint]time.Time{},
		known: expirable.NewLRU[string, authEntry](4096, nil, authCacheTTL), guesses: newGuessLimiter(KeyGuesses)}
}

// Principal is an account as the API shows it.
type Principal struct {
	ID        uint      `json:"id" example:"2"`
	Name      string    `json:"name" example:"research-agent"`
	Role      string    `json:"role" example:"agent"`
	CreatedAt time.Time `json:"created_at"`
	Keys      []APIKey  `json:"keys"`
}

// APIKey describes a key without revealing it.
type APIKey struct {
	ID         uint       `json:"id" example:"3"`
	Prefix     string     `json:"prefix" example:"tb_3f9a0c"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// NewKey is a freshly issued key: the only time the secret is shown.
type NewKey struct {
	ID          uint   `json:"id" example:"3"`
	PrincipalID uint   `json:"principal_id" example:"2"`
	Prefix      string `json:"prefix" example:"tb_3f9a0c"`
	Key         string `json:"key" example:"tb_3f9a0c…"`
}

// CreatedPrincipal answers POST /principals: the account and its first key.
type CreatedPrincipal struct {
	ID    uint   `json:"id" example:"2"`
	Name  string `json:"name" example:"research-agent"`
	Role  string `json:"role" example:"agent"`
	KeyID uint   `json:"key_id" example:"3"`
	Key   string `json:"key" example:"tb_3f9a0c…"`
}

// NewPrincipal is the input of CreatePrincipal.
type NewPrincipal struct {
	Name string `json:"name" example:"research-agent"`
	Role string `json:"role" example:"agent" enums:"admin,reviewer,agent"`
}

// CreatePrincipal creates an account with a first API key.
func (a *Accounts) CreatePrincipal(ctx context.Context, in NewPrincipal, by *models.Principal) (*CreatedPrincipal, error) {
	var ps models.Problems
	in.Name = strings.TrimSpace(in.Name)
	if !principalNamePattern.MatchString(in.Name) {
		ps.Add("/name", "%q must be 1 to 64 ASCII letters, digits, '.', '_' or '-', starting with a letter or digit", in.Name)
	}
	if !slices.Contains(Roles, in.Role) {
		ps.Add("/role", "%q is not a role; use admin, reviewer or agent", in.Role)
	}
	if len(ps) > 0 {
		return nil, &models.ValidationError{What: "principal", Problems: ps}
	}
	secret, key, err := newKey()
	if err != nil {
		return nil, err
	}
	p := &models.Principal{Name: in.Name, Role: in.Role}
	if err := a.store.CreatePrincipal(ctx, p, key); err != nil {
		return nil, err
	}
	a.log.InfoContext(ctx, "principal created", "principal", p.Name, "role", p.Role, "by", models.ActorName(by))
	return &CreatedPrincipal{ID: p.ID, Name: p.Name, Role: p.Role, KeyID: key.ID, Key: secret}, nil
}

// Principals lists every account with its keys (never the secrets).
func (a *Accounts) Principals(ctx context.Context) ([]Principal, error) {
	ps, err := a.store.Principals(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Principal, 0, len(ps))
	for _, p := range ps {
		v := Principal{ID: p.ID, Name: p.Name, Role: p.Role, CreatedAt: p.CreatedAt, Keys: []APIKey{}}
		for _, k := range p.Keys {
			v.Keys = append(v.Keys, APIKey{ID: k.ID, Prefix: k.Prefix, CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt, RevokedAt: k.RevokedAt})
		}
		out = append(out, v)
	}
	return out, nil
}

// IssueKey adds a new API key to a principal.
func (a *Accounts) IssueKey(ctx context.Context, principalID uint, by *models.Principal) (*NewKey, error) {
	p, err := a.store.PrincipalByID(ctx, principalID)
	if err != nil {
		return nil, err
	}
	secret, key, err := newKey()
	if err != nil {
		return nil, err
	}
	key.PrincipalID = p.ID
	if err := a.store.CreateAPIKey(ctx, key); err != nil {
		return nil, err
	}
	a.log.InfoContext(ctx, "api key issued", "principal", p.Name, "key_prefix", key.Prefix, "by", models.ActorName(by))
	return &NewKey{ID: key.ID, PrincipalID: p.ID, Prefix: key.Prefix, Key: secret}, nil
}

// RevokeKey revokes a key at once. The last active admin key cannot be
// revoked: that would lock every admin out.
func (a *Accounts) RevokeKey(ctx context.Context, id uint, by *models.Principal) error {
	key, err := a.store.RevokeAPIKey(ctx, id, func(owner *models.Principal, adminKeys int64) error {
		if owner.Role == RoleAdmin && adminKeys <= 1 {
			return models.ErrConflict.Errorf("key %d is the last active admin key; issue another admin key first", id)
		}
		return nil
	})
	if err != nil {
		return err
	}
	a.known.Purge()
	for _, fn := range a.revoked {
		fn(ctx)
	}
	a.log.InfoContext(ctx, "api key revoked", "key_prefix", key.Prefix, "by", models.ActorName(by))
	return nil
}

// Authenticate returns the principal owning an active key, for a request
// from client (its network address). Any failure is models.ErrUnauthorized
// with no hint of which part was wrong; past KeyGuesses wrong keys from one
// client, every key from it is refused with a TooManyGuessesError until
// the window ends.
func (a *Accounts) Authenticate(ctx context.Context, client, secret string) (*models.Principal, error) {
	p, err := a.authenticate(ctx, secret)
	if errors.Is(err, models.ErrUnauthorized) {
		return nil, a.guesses.refuse(ctx, client, err)
	}
	return p, err
}

func (a *Accounts) authenticate(ctx context.Context, secret string) (*models.Principal, error) {
	if !strings.HasPrefix(secret, KeyPrefix) && len(secret) < MinAdminKeyLen {
		return nil, models.ErrUnauthorized.Errorf("invalid api key")
	}
	hash := hashKey(secret)
	if e, ok := a.known.Get(hash); ok {
		a.touch(ctx, e.keyID)
		p := e.principal
		return &p, nil
	}
	key, p, err := a.store.KeyByHash(ctx, hash)
	if errors.Is(err, models.ErrNotFound) {
		return nil, models.ErrUnauthorized.Errorf("invalid api key")
	}
	if err != nil {
		return nil, err
	}
	a.known.Add(hash, authEntry{keyID: key.ID, principal: *p})
	a.touch(ctx, key.ID)
	return p, nil
}

// touch records a key's use at most once a minute, so authentication does
// not turn every read into a write.
func (a *Accounts) touch(ctx context.Context, id uint) {
	now := time.Now().UTC()
	a.mu.Lock()
	last, ok := a.touched[id]
	if ok && now.Sub(last) < time.Minute {
		a.mu.Unlock()
		return
	}
	a.touched[id] = now
	a.mu.Unlock()
	if err := a.store.TouchAPIKey(ctx, id, now); err != nil {
		a.log.WarnContext(ctx, "record api key use", "err", err)
	}
}

// Bootstrap makes sure an admin exists. On the first start it creates the
// "admin" principal with adminKey, or with a random key that it returns to
// be printed once; later it adds a configured adminKey that is not stored
// yet. An operator's own key is never returned, so it is never printed.
func (a *Accounts) Bootstrap(ctx context.Context, adminKey string) (string, error) {
	if adminKey != "" && len(adminKey) < MinAdminKeyLen {
		return "", models.ErrInvalid.Errorf("TOOLBELT_ADMIN_KEY must be at least %d characters", MinAdminKeyLen)
	}
	n, err := a.store.CountPrincipals(ctx)
	if err != nil {
		return "", fmt.Errorf("count principals: %w", err)
	}
	if n == 0 {
		secret, key, err := newKey()
		if err != nil {
			return "", err
		}
		if adminKey != "" {
			secret, key = "", keyFromSecret(adminKey)
		}
		err = a.store.CreatePrincipal(ctx, &models.Principal{Name: "admin", Role: RoleAdmin}, key)
		if err == nil {
			a.log.InfoContext(ctx, "admin principal created", "key_prefix", key.Prefix)
			return secret, nil
		}
		// Another instance over the same database made it first: this
		// start is a later one.
		if !errors.Is(err, models.ErrConflict) {
			return "", err
		}
	}
	if adminKey == "" {
		return "", nil
	}
	if _, _, err := a.store.KeyByHash(ctx, hashKey(adminKey)); err == nil {
		return "", nil
	}
	admin, err := a.store.PrincipalByName(ctx, "admin")
	if err != nil {
		return "", fmt.Errorf("add TOOLBELT_ADMIN_KEY: %w", err)
	}
	key := keyFromSecret(adminKey)
	key.PrincipalID = admin.ID
	err = a.store.CreateAPIKey(ctx, key)
	if errors.Is(err, models.ErrConflict) {
		// The key exists but was revoked: a revocation stands, and the
		// server still starts so other admins can get in.
		a.log.WarnContext(ctx, "TOOLBELT_ADMIN_KEY was revoked and is not accepted; unset it or choose a new key", "key_prefix", key.Prefix)
		return "", nil
	}
	if err != nil {
		return "", err
	}
	a.log.InfoContext(ctx, "TOOLBELT_ADMIN_KEY added to the admin principal", "key_prefix", key.Prefix)
	return "", nil
}

// SetGrants stores which categories and tools an agent may use.
func (a *Accounts) SetGrants(ctx context.Context, principalID uint, g Grants, by *models.Principal) (Grants, error) {
	p, err := a.store.PrincipalByID(ctx, principalID)
	if err != nil {
		return Grants{}, err
	}
	var ps models.Problems
	if p.Role != RoleAgent {
		ps.Add("", "principal %d has role %s; grants apply to agents (admins and reviewers use roles)", p.ID, p.Role)
	}
	g.Categories = tooldef.Dedupe(g.Categories)
	g.Tools = tooldef.Dedupe(g.Tools)
	for i, c := range g.Categories {
		if !slices.Contains(tooldef.Categories, c) {
			ps.Add(fmt.Sprintf("/categories/%d", i), "%q is not a category; use one of %s", c, strings.Join(tooldef.Categories, ", "))
		}
	}
	for i, t := range g.Tools {
		at := fmt.Sprintf("/tools/%d", i)
		if !tooldef.NamePattern.MatchString(t) {
			ps.Add(at, "%q is not a tool name", t)
			continue
		}
		// A grant by name covers a safe tool only (authorize, selection): a
		// name that is no tool, or a moderate or dangerous one, would be
		// saved and do nothing.
		tool, _, err := a.store.ToolByName(ctx, t, false)
		switch {
		case errors.Is(err, models.ErrNotFound):
			ps.Add(at, "%q is not a registered tool", t)
		case err != nil:
			return Grants{}, err
		case tool.Level != tooldef.LevelSafe:
			ps.Add(at, "%q is %s, and a tool granted by name must be safe; grant its category (%s) for moderate and dangerous tools, which are then approved or confirmed at call time", t, tool.Level, tool.Category)
		}
	}
	if len(ps) > 0 {
		return Grants{}, &models.ValidationError{What: "grants", Problems: ps}
	}
	if err := a.authz.SetGrants(p.ID, g); err != nil {
		return Grants{}, err
	}
	a.log.InfoContext(ctx, "grants set", "principal", p.Name, "categories", g.Categories, "tools", g.Tools, "by", models.ActorName(by))
	return a.authz.Grants(p.ID)
}

// Grants returns what an agent may use.
func (a *Accounts) Grants(ctx context.Context, principalID uint) (Grants, error) {
	if _, err := a.store.PrincipalByID(ctx, principalID); err != nil {
		return Grants{}, err
	}
	return a.authz.Grants(principalID)
}

// newKey makes a random 256-bit key and its stored form.
func newKey() (string, *models.APIKey, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", nil, fmt.Errorf("generate api key: %w", err)
	}
	secret := KeyPrefix + hex.EncodeToString(b)
	return secret, keyFromSecret(secret), nil
}

func keyFromSecret(secret string) *models.APIKey {
	// Show enough to tell keys apart: 6 hex digits of a generated key, 4
	// characters of a key an operator chose.
	prefix := secret[:min(4, len(secret))]
	if strings.HasPrefix(secret, KeyPrefix) && len(secret) > 9 {
		prefix = secret[:9]
	}
	return &models.APIKey{Prefix: prefix, Hash: hashKey(secret)}
}

func hashKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
