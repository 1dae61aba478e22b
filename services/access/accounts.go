// Package access decides who may do what: principals and their API keys
// (hashed, never stored in plain text), console sessions, the grants of
// agents, and the Casbin RBAC policies derived from the route table.
package access

import (
	"cmp"
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

	"unicode/utf8"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/ulule/limiter/v3"

	"toolbelt/internal/ttlcache"
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
	known *ttlcache.Cache[string, authEntry]
	// verified are the keys last found usable in the database, kept until
	// a key anywhere stops working (every instance is told, and a lost
	// notice counts as one): while the database does not answer, within
	// outage's grace, they are what the instance still trusts.
	verified *lru.Cache[string, authEntry]
	// forgotten counts ForgetKeys (under keysMu, with the caches' adds):
	// a key read before one is not kept after it, though the answer came
	// later (it may be the key just revoked).
	keysMu    sync.Mutex
	forgotten uint64
	outage    *Outage
	now       func() time.Time // time.Now; tests move it
	// guesses slows brute-forcing of keys, per client address.
	guesses *guessLimiter
	// revoked run after a key is revoked or a principal disabled or
	// deleted (other instances are told).
	revoked []func(context.Context)
	// gone run with the credentials a disabled or deleted principal lost.
	gone []func(context.Context, []models.Credential)
}

// ForgetKeys drops the cached authentications and the keys trusted
// through a database outage, so a key revoked on another instance is
// refused here at once, and stays refused if the database stops.
func (a *Accounts) ForgetKeys() {
	a.keysMu.Lock()
	defer a.keysMu.Unlock()
	a.forgotten++
	a.known.Purge()
	a.verified.Purge()
}

type authEntry struct {
	key       models.APIKey
	principal models.Principal
}

// authCacheTTL bounds how long a cached authentication is trusted.
const authCacheTTL = 10 * time.Second

// AccountsDeps is what the account service needs.
type AccountsDeps struct {
	Store *models.Store
	Authz *Authz
	Log   *slog.Logger
	// GuessStore counts wrong API keys per client address (this
	// process's memory when nil; the database's store shares the count
	// between instances).
	GuessStore limiter.Store
	// OnRevoke run after every change that stops keys working: a key
	// revoked, a principal disabled or deleted (other instances are told).
	OnRevoke []func(context.Context)
	// OnGone run with the credentials (connected accounts, stored
	// secrets) a principal lost when it was disabled or deleted, already
	// deleted from the database: to revoke their tokens upstream. They
	// run after the change is committed, with its context.
	OnGone []func(context.Context, []models.Credential)
	// Outage is the instance's database outage state, shared with
	// readiness; nil: an outage of its own with no grace.
	Outage *Outage
}

// NewAccounts returns the account service.
func NewAccounts(d AccountsDeps) *Accounts {
	verified, _ := lru.New[string, authEntry](4096) // fails only for a size below one
	return &Accounts{store: d.Store, authz: d.Authz, log: d.Log, touched: map[uint]time.Time{},
		known: ttlcache.New[string, authEntry](4096, authCacheTTL), verified: verified, outage: cmp.Or(d.Outage, NewOutage(0)),
		now: time.Now, guesses: newGuessLimiter(d.GuessStore, KeyGuesses()), revoked: d.OnRevoke, gone: d.OnGone}
}

// Principal is an account as the API shows it.
type Principal struct {
	ID        uint      `json:"id" example:"2"`
	Name      string    `json:"name" example:"research-agent"`
	Role      string    `json:"role" example:"agent"`
	CreatedAt time.Time `json:"created_at"`
	// DisabledAt is set while the principal is disabled: its keys are
	// refused.
	DisabledAt *time.Time `json:"disabled_at,omitempty"`
	Keys       []APIKey   `json:"keys"`
}

// APIKey describes a key without revealing it.
type APIKey struct {
	ID         uint       `json:"id" example:"3"`
	Prefix     string     `json:"prefix" example:"tb_3f9a0c"`
	Label      string     `json:"label,omitempty" example:"ci deploy"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// KeyOptions are what a new key may carry besides its secret: a label
// saying what it is for, and when it stops working.
type KeyOptions struct {
	Label     string     `json:"label,omitempty" example:"ci deploy"`
	ExpiresAt *time.Time `json:"expires_at,omitempty" example:"2027-01-01T00:00:00Z"`
}

// check adds the options' problems to ps, at pointers under at.
func (o *KeyOptions) check(ps *models.Problems, at string, now time.Time) {
	o.Label = strings.TrimSpace(o.Label)
	if utf8.RuneCountInString(o.Label) > 64 {
		ps.Add(at+"label", "is longer than 64 characters")
	}
	ps.CheckText(at+"label", o.Label, false)
	if o.ExpiresAt != nil {
		if !o.ExpiresAt.After(now) {
			ps.Add(at+"expires_at", "%s is not in the future", o.ExpiresAt.Format(time.RFC3339))
		}
		utc := o.ExpiresAt.UTC()
		o.ExpiresAt = &utc
	}
}

// describeKey is a key in an audit entry: its id, label and expiry.
func describeKey(k *models.APIKey) string {
	s := fmt.Sprintf("key %d (%s)", k.ID, cmp.Or(k.Label, k.Prefix))
	if k.ExpiresAt != nil {
		s += ", expires " + k.ExpiresAt.Format(time.RFC3339)
	}
	return s
}

func principalTarget(id uint) string { return fmt.Sprintf("principal:%d", id) }

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
	// KeyLabel and KeyExpiresAt are the first key's options.
	KeyLabel     string     `json:"key_label,omitempty" example:"ci deploy"`
	KeyExpiresAt *time.Time `json:"key_expires_at,omitempty" example:"2027-01-01T00:00:00Z"`
}

// CreatePrincipal creates an account with a first API key.
func (a *Accounts) CreatePrincipal(ctx context.Context, in NewPrincipal, by *models.Principal) (*CreatedPrincipal, error) {
	var ps models.Problems
	in.Name = strings.TrimSpace(in.Name)
	checkPrincipal(&ps, in.Name, in.Role)
	opts := KeyOptions{Label: in.KeyLabel, ExpiresAt: in.KeyExpiresAt}
	opts.check(&ps, "/key_", time.Now())
	if len(ps) > 0 {
		return nil, &models.ValidationError{What: "principal", Problems: ps}
	}
	secret, key, err := newKey()
	if err != nil {
		return nil, err
	}
	key.Label, key.ExpiresAt = opts.Label, opts.ExpiresAt
	p := &models.Principal{Name: in.Name, Role: in.Role}
	err = a.store.Audited(ctx, models.AuditPrincipalCreate, func(tx *models.Store) (string, string, error) {
		if err := tx.CreatePrincipal(ctx, p, key); err != nil {
			return "", "", err
		}
		return principalTarget(p.ID), fmt.Sprintf("%s, role %s, first %s", p.Name, p.Role, describeKey(key)), nil
	})
	if err != nil {
		return nil, err
	}
	a.log.InfoContext(ctx, "principal created", "principal", p.Name, "role", p.Role, "by", models.ActorName(by))
	return &CreatedPrincipal{ID: p.ID, Name: p.Name, Role: p.Role, KeyID: key.ID, Key: secret}, nil
}

// checkPrincipal adds the problems of a new principal's name and role.
func checkPrincipal(ps *models.Problems, name, role string) {
	if !principalNamePattern.MatchString(name) {
		ps.Add("/name", "%q must be 1 to 64 ASCII letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	if !slices.Contains(Roles, role) {
		ps.Add("/role", "%q is not a role; use admin, reviewer or agent", role)
	}
}

// Principals lists every account with its keys (never the secrets).
func (a *Accounts) Principals(ctx context.Context) ([]Principal, error) {
	ps, err := a.store.Principals(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Principal, 0, len(ps))
	for _, p := range ps {
		v := Principal{ID: p.ID, Name: p.Name, Role: p.Role, CreatedAt: p.CreatedAt, DisabledAt: p.DisabledAt, Keys: []APIKey{}}
		for _, k := range p.Keys {
			v.Keys = append(v.Keys, APIKey{ID: k.ID, Prefix: k.Prefix, Label: k.Label, CreatedAt: k.CreatedAt,
				LastUsedAt: k.LastUsedAt, ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt})
		}
		out = append(out, v)
	}
	return out, nil
}

// IssueKey adds a new API key to a principal, with its label and expiry.
func (a *Accounts) IssueKey(ctx context.Context, principalID uint, opts KeyOptions, by *models.Principal) (*NewKey, error) {
	var ps models.Problems
	opts.check(&ps, "/", time.Now())
	if len(ps) > 0 {
		return nil, &models.ValidationError{What: "key", Problems: ps}
	}
	p, err := a.store.PrincipalByID(ctx, principalID)
	if err != nil {
		return nil, err
	}
	secret, key, err := newKey()
	if err != nil {
		return nil, err
	}
	key.PrincipalID, key.Label, key.ExpiresAt = p.ID, opts.Label, opts.ExpiresAt
	err = a.store.Audited(ctx, models.AuditKeyIssue, func(tx *models.Store) (string, string, error) {
		if err := tx.CreateAPIKey(ctx, key); err != nil {
			return "", "", err
		}
		return fmt.Sprintf("key:%d", key.ID), fmt.Sprintf("%s for %s (%d)", describeKey(key), p.Name, p.ID), nil
	})
	if err != nil {
		return nil, err
	}
	a.log.InfoContext(ctx, "api key issued", "principal", p.Name, "key_prefix", key.Prefix, "by", models.ActorName(by))
	return &NewKey{ID: key.ID, PrincipalID: p.ID, Prefix: key.Prefix, Key: secret}, nil
}

// RevokeKey revokes a key at once. The last active admin key cannot be
// revoked: that would lock every admin out.
func (a *Accounts) RevokeKey(ctx context.Context, id uint, by *models.Principal) (*RevokedKey, error) {
	var key *models.APIKey
	var owner *models.Principal
	err := a.store.Audited(ctx, models.AuditKeyRevoke, func(tx *models.Store) (string, string, error) {
		k, err := tx.RevokeAPIKey(ctx, id, func(k *models.APIKey, o *models.Principal, otherAdminKeys int64) error {
			owner = o
			// An expired key, or a disabled admin's, lets nobody in: revoking
			// it takes no way in away.
			if o.Role == RoleAdmin && o.DisabledAt == nil && !k.Expired(time.Now()) && otherAdminKeys == 0 {
				return models.ErrConflict.Errorf("key %d is the last active admin key; issue another admin key first", id)
			}
			return nil
		})
		if err != nil {
			return "", "", err
		}
		key = k
		return fmt.Sprintf("key:%d", k.ID), fmt.Sprintf("%s of %s (%d)", describeKey(k), owner.Name, owner.ID), nil
	})
	if err != nil {
		return nil, err
	}
	a.keysChanged(ctx)
	a.log.InfoContext(ctx, "api key revoked", "key_prefix", key.Prefix, "by", models.ActorName(by))
	return &RevokedKey{Label: cmp.Or(key.Label, key.Prefix+"…"), Owner: owner.Name, OwnerID: owner.ID}, nil
}

// RevokedKey names a key just revoked for a person: its label (or its
// prefix) and its principal's name.
type RevokedKey struct {
	Label, Owner string
	OwnerID      uint
}

// keysChanged drops the cached authentications here and tells the other
// instances to, so a key that stopped working is refused at once
// everywhere.
func (a *Accounts) keysChanged(ctx context.Context) {
	a.ForgetKeys()
	for _, fn := range a.revoked {
		fn(ctx)
	}
}

// guardPrincipal refuses a change that would lock the admins out: by
// changing themselves, or taking away the last admin with a working key.
func guardPrincipal(by *models.Principal, verb string) models.PrincipalGuard {
	return func(p *models.Principal, otherAdminKeys int64) error {
		if by != nil && p.ID == by.ID {
			return models.ErrForbidden.Errorf("you cannot %s yourself; another admin must", verb)
		}
		if p.Role == RoleAdmin && p.DisabledAt == nil && otherAdminKeys == 0 {
			return models.ErrConflict.Errorf("%s is the last admin with a working key; create or enable another admin first", p.Name)
		}
		return nil
	}
}

// SetDisabled disables a principal, or enables it again. A disabled
// principal's keys are refused at once, on every instance, and its
// console sessions end; its keys work again once enabled (unless revoked
// or expired meanwhile). Its credentials (connected accounts, stored
// secrets) are deleted in the same transaction, and not given back: the
// person connects again once enabled. Admins cannot disable themselves
// or the last admin.
func (a *Accounts) SetDisabled(ctx context.Context, id uint, disabled bool, by *models.Principal) (*Principal, error) {
	action, verb := models.AuditPrincipalEnable, "enable"
	guard := func(*models.Principal, int64) error { return nil }
	if disabled {
		action, verb = models.AuditPrincipalDisable, "disable"
		guard = guardPrincipal(by, verb)
	}
	var p *models.Principal
	var gone []models.Credential
	err := a.store.Audited(ctx, action, func(tx *models.Store) (string, string, error) {
		var err error
		if p, err = tx.SetPrincipalDisabled(ctx, id, disabled, guard); err != nil {
			return "", "", err
		}
		if disabled {
			if gone, err = tx.DeleteCredentialsOf(ctx, p.ID); err != nil {
				return "", "", err
			}
		}
		return principalTarget(p.ID), fmt.Sprintf("%s, role %s", p.Name, p.Role) + goneDetail(gone), nil
	})
	if err != nil {
		return nil, err
	}
	a.keysChanged(ctx)
	a.credentialsGone(ctx, gone)
	a.log.InfoContext(ctx, "principal "+verb+"d", "principal", p.Name, "by", models.ActorName(by))
	all, err := a.Principals(ctx)
	if err != nil {
		return nil, err
	}
	for _, v := range all {
		if v.ID == p.ID {
			return &v, nil
		}
	}
	return nil, models.ErrNotFound.Errorf("principal %d", p.ID) // deleted meanwhile
}

// DeletePrincipal removes a principal with its keys, console sessions,
// grants and credentials; its calls and the audit log keep its name.
// Admins cannot delete themselves or the last admin.
func (a *Accounts) DeletePrincipal(ctx context.Context, id uint, by *models.Principal) error {
	var p *models.Principal
	var gone []models.Credential
	err := a.store.Audited(ctx, models.AuditPrincipalDelete, func(tx *models.Store) (string, string, error) {
		var err error
		if p, err = tx.DeletePrincipal(ctx, id, guardPrincipal(by, "delete")); err != nil {
			return "", "", err
		}
		if gone, err = tx.DeleteCredentialsOf(ctx, p.ID); err != nil {
			return "", "", err
		}
		return principalTarget(p.ID), fmt.Sprintf("%s, role %s", p.Name, p.Role) + goneDetail(gone), nil
	})
	if err != nil {
		return err
	}
	a.keysChanged(ctx)
	a.credentialsGone(ctx, gone)
	if err := a.authz.SetGrants(p.ID, Grants{}); err != nil {
		return err
	}
	a.log.InfoContext(ctx, "principal deleted", "principal", p.Name, "by", models.ActorName(by))
	return nil
}

// credentialsGone passes the credentials a principal lost to OnGone.
func (a *Accounts) credentialsGone(ctx context.Context, gone []models.Credential) {
	if len(gone) == 0 {
		return
	}
	for _, fn := range a.gone {
		fn(ctx, gone)
	}
}

// goneDetail says, for the audit log, which credentials went: kinds
// and names, never what they held.
func goneDetail(gone []models.Credential) string {
	if len(gone) == 0 {
		return ""
	}
	names := make([]string, len(gone))
	for i, c := range gone {
		names[i] = c.Kind + " " + c.Name
	}
	return "; credentials deleted: " + strings.Join(names, ", ")
}

// Authenticate returns the principal owning an active key, and the key,
// for a request from client (its network address). An unknown or revoked
// key is models.ErrUnauthorized with no hint of which; past KeyGuesses()
// such keys from one client, every key from it is refused with a
// TooManyGuessesError until the window ends. An expired key, or one of a
// disabled principal, is refused saying so: its holder knows the key
// already, and learns what to ask an admin for.
func (a *Accounts) Authenticate(ctx context.Context, client, secret string) (*models.Principal, *models.APIKey, error) {
	p, key, err := a.authenticate(ctx, secret)
	if errors.Is(err, errUnknownKey) {
		return nil, nil, a.guesses.refuse(ctx, client, err)
	}
	return p, key, err
}

// errUnknownKey is a key that matches no unrevoked key: a guess.
var errUnknownKey = models.ErrUnauthorized.Errorf("invalid api key")

func (a *Accounts) authenticate(ctx context.Context, secret string) (*models.Principal, *models.APIKey, error) {
	if !strings.HasPrefix(secret, KeyPrefix) && len(secret) < MinAdminKeyLen {
		return nil, nil, errUnknownKey
	}
	hash, now := hashKey(secret), a.now()
	e, ok := a.known.Get(hash)
	// Past the outage's grace nothing cached is trusted: the database is
	// asked (and its answer ends the outage).
	if _, refusing := a.outage.Refusing(now); !ok || refusing {
		var err error
		if e, err = a.lookUp(ctx, hash, now); err != nil {
			return nil, nil, err
		}
	}
	if err := usable(&e.key, &e.principal, now); err != nil {
		return nil, nil, err
	}
	a.touch(ctx, e.key.ID)
	p, key := e.principal, e.key
	return &p, &key, nil
}

// lookUp finds the key of hash in the database. While the database does
// not answer, a key it last found usable is trusted within the outage's
// grace; a revoked, disabled or deleted one is not, since every such
// change drops the verified keys (ForgetKeys).
func (a *Accounts) lookUp(ctx context.Context, hash string, now time.Time) (authEntry, error) {
	a.keysMu.Lock()
	before := a.forgotten
	a.keysMu.Unlock()
	key, p, err := a.store.KeyByHash(ctx, hash)
	switch {
	case err == nil:
		a.outage.Up()
		e := authEntry{key: *key, principal: *p}
		a.keysMu.Lock()
		if a.forgotten == before {
			a.known.Add(hash, e)
			a.verified.Add(hash, e)
		}
		a.keysMu.Unlock()
		return e, nil
	case errors.Is(err, models.ErrNotFound):
		a.outage.Up()
		return authEntry{}, errUnknownKey
	case !models.Unavailable(err):
		return authEntry{}, err
	}
	a.outage.Down(now)
	e, ok := a.verified.Get(hash)
	if since, refusing := a.outage.Refusing(now); ok && !refusing {
		a.log.DebugContext(ctx, "the database does not answer: trusting a key checked before", "key_prefix", e.key.Prefix, "since", since)
		return e, nil
	}
	return authEntry{}, err
}

// usable refuses an expired key and a disabled principal's, saying which.
func usable(key *models.APIKey, p *models.Principal, now time.Time) error {
	if key.Expired(now) {
		return models.ErrUnauthorized.Errorf("api key %s expired at %s; ask an admin for a new key", key.Prefix, key.ExpiresAt.Format(time.RFC3339))
	}
	if p.DisabledAt != nil {
		return models.ErrUnauthorized.Errorf("principal %q is disabled; ask an admin to enable it", p.Name)
	}
	return nil
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
	// Casbin stores the policies through its own adapter, outside any
	// transaction of ours: the entry follows the change it records.
	err = a.store.Audited(ctx, models.AuditGrantsSet, func(*models.Store) (string, string, error) {
		return principalTarget(p.ID), fmt.Sprintf("%s: categories [%s], tools [%s]", p.Name, strings.Join(g.Categories, ", "), strings.Join(g.Tools, ", ")), nil
	})
	if err != nil {
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
	var h [2 * sha256.Size]byte // on the stack: one allocation, the string
	hex.Encode(h[:], sum[:])
	return string(h[:])
}
