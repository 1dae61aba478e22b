package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Upstream transports: a command Toolbelt starts in the sandbox and talks
// to over its standard input and output, a Streamable HTTP endpoint, or
// the legacy HTTP+SSE one.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
	TransportSSE   = "sse"
)

// Isolation of a stdio upstream: one process shared by every call, or one
// per session, working in that session's directory.
const (
	IsolationShared  = "shared"
	IsolationSession = "session"
)

// Upstream is an MCP server an admin registered: Toolbelt connects to it,
// and its tools become Toolbelt tools (each an UpstreamTool).
type Upstream struct {
	ID   uint   `gorm:"primaryKey" json:"id"`
	Name string `gorm:"size:32;not null;uniqueIndex" json:"name"`
	// Transport is how Toolbelt reaches the server: a command in the
	// sandbox (stdio), Streamable HTTP (http) or legacy HTTP+SSE (sse).
	Transport string `gorm:"size:8;not null" json:"transport" enums:"stdio,http,sse"`
	// Command is the program and its arguments (stdio).
	Command []string `gorm:"serializer:json" json:"command,omitempty"`
	// Env is the stdio process's whole environment besides PATH and HOME:
	// each value literal text or {{env.NAME}}, a configured secret.
	Env map[string]string `gorm:"serializer:json" json:"env,omitempty"`
	// Mounts are host directories a stdio server reads (its code), by
	// name: each shown read-only at /opt/<name> in the sandbox.
	Mounts map[string]string `gorm:"serializer:json" json:"mounts,omitempty"`
	// URL is the endpoint (http, sse).
	URL string `gorm:"size:2048;not null;default:''" json:"url,omitempty"`
	// Headers are sent with every request (http, sse); a value may
	// reference a secret as {{env.NAME}}.
	Headers map[string]string `gorm:"serializer:json" json:"headers,omitempty"`
	// Auth, when set, makes each caller reach the server as the person it
	// acts for rather than with the registration's own headers.
	Auth *UpstreamAuth `gorm:"serializer:json" json:"auth,omitempty"`
	// AuthSecret is a client secret dynamic registration issued for Auth,
	// sealed by the vault; never shown.
	AuthSecret []byte `json:"-"`
	// Egress are the hosts (host or host:port) a stdio process may reach,
	// through Toolbelt's proxy under the outbound policy; it has no
	// network of its own.
	Egress    []string `gorm:"serializer:json" json:"egress,omitempty"`
	Isolation string   `gorm:"size:8;not null;default:'shared'" json:"isolation"`
	// MaxConcurrent caps the calls in flight to the server (per process
	// for stdio).
	MaxConcurrent int `gorm:"not null;default:4" json:"max_concurrent"`
	// IdleSeconds is how long a stdio process stays warm unused.
	IdleSeconds int `gorm:"not null;default:300" json:"idle_seconds"`
	// Category is the category its tools get unless one is set per tool.
	Category   string     `gorm:"size:16;not null" json:"category"`
	DisabledAt *time.Time `json:"disabled_at,omitempty"`
	// Refused says what the last look at its tools refused that is no
	// one tool's: tools served without a name, tools past the limit.
	Refused   []string  `gorm:"serializer:json" json:"refused,omitempty"`
	CreatedBy *uint     `json:"created_by,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Upstream authentication types (UpstreamAuth.Type).
const (
	// UpstreamAuthOAuth: each person connects their own account at the
	// server's OAuth 2.1 authorization server; calls carry their token.
	UpstreamAuthOAuth = "oauth"
	// UpstreamAuthExchange: the organisation's identity provider mints a
	// token for the server from the person's own token (RFC 8693).
	UpstreamAuthExchange = "exchange"
)

// Client registrations of Toolbelt at an upstream's authorization server
// (UpstreamAuth.Registration).
const (
	// RegistrationMetadata: Toolbelt's client ID metadata document URL is
	// its client id.
	RegistrationMetadata = "metadata"
	// RegistrationDynamic: registered by RFC 7591 dynamic registration.
	RegistrationDynamic = "dynamic"
	// RegistrationStatic: an admin gave the client id (and secret).
	RegistrationStatic = "static"
)

// UpstreamAuth is how callers authenticate to an upstream as the person
// they act for: what an admin asked for, and what discovery found at
// registration. No token is here: those are each person's, in the vault
// (Credential).
type UpstreamAuth struct {
	Type string `json:"type"`
	// Scopes are those asked for (none: the server's advertised ones).
	Scopes []string `json:"scopes,omitempty"`
	// Resource is the server's resource identifier (RFC 8707), from its
	// protected resource metadata, sent with every authorization and
	// token request.
	Resource string `json:"resource,omitempty"`
	// Issuer and the endpoints are the authorization server's, from its
	// metadata (RFC 8414 or OpenID discovery).
	Issuer                string `json:"issuer,omitempty"`
	AuthorizationEndpoint string `json:"authorization_endpoint,omitempty"`
	TokenEndpoint         string `json:"token_endpoint,omitempty"`
	RevocationEndpoint    string `json:"revocation_endpoint,omitempty"`
	// Registration says how Toolbelt got ClientID (Registration*).
	Registration string `json:"registration,omitempty"`
	ClientID     string `json:"client_id,omitempty"`
	// ClientSecret is an admin-given secret as a reference to a
	// configured secret ({{env.NAME}}), never the value.
	ClientSecret string `json:"client_secret,omitempty"`
	// Audience is what a token exchange asks a token for (exchange).
	Audience string `json:"audience,omitempty"`
}

// UpstreamTool states of a tool an upstream serves.
const (
	// UpstreamToolActive: accepted, a Toolbelt tool.
	UpstreamToolActive = "active"
	// UpstreamToolNew: served, never accepted: not a tool yet.
	UpstreamToolNew = "new"
	// UpstreamToolGone: accepted once, no longer served: its Toolbelt tool
	// refuses calls until the upstream serves it again.
	UpstreamToolGone = "gone"
)

// UpstreamTool is one tool an upstream serves, as accepted (pinned) and
// as last served when that differs (pending an admin's acceptance).
type UpstreamTool struct {
	ID         uint   `gorm:"primaryKey" json:"-"`
	UpstreamID uint   `gorm:"not null;uniqueIndex:idx_upstream_tool,priority:1" json:"-"`
	Remote     string `gorm:"size:128;not null;uniqueIndex:idx_upstream_tool,priority:2" json:"remote"`
	// Tool is the Toolbelt tool's name ('' until first accepted).
	Tool   string `gorm:"size:64;not null;default:''" json:"tool,omitempty"`
	Status string `gorm:"size:8;not null" json:"status"`
	// Alias is the Toolbelt name an admin chose instead of
	// <server>__<tool> ('' for that one).
	Alias string `gorm:"size:64;not null;default:''" json:"alias,omitempty"`
	// DisabledAt is when an admin disabled the tool: it is out of the
	// catalog and its calls are refused until enabled.
	DisabledAt *time.Time `json:"disabled_at,omitempty"`
	// Refused says why what the server serves under this name cannot be
	// a Toolbelt tool ('' when it can): the accepted definition, if any,
	// stays.
	Refused string `gorm:"size:1000;not null;default:''" json:"refused,omitempty"`
	// Level and Category, when set, are an admin's choice over the
	// level the annotations give and the server's category.
	Level    string `gorm:"size:16;not null;default:''" json:"level,omitempty"`
	Category string `gorm:"size:16;not null;default:''" json:"category,omitempty"`
	// Accepted is the definition the upstream served when an admin
	// accepted it (the MCP tool's JSON), and its hash.
	Accepted     string `gorm:"not null;default:''" json:"-"`
	AcceptedHash string `gorm:"size:64;not null;default:''" json:"accepted_hash,omitempty"`
	// Pending is what the upstream serves now when it differs from
	// Accepted, waiting for an admin.
	Pending      string     `gorm:"not null;default:''" json:"-"`
	PendingHash  string     `gorm:"size:64;not null;default:''" json:"pending_hash,omitempty"`
	PendingSince *time.Time `json:"pending_since,omitempty"`
	UpdatedAt    time.Time  `json:"updated_at"`
}

// CreateUpstream stores a new upstream; a taken name is ErrConflict.
func (s *Store) CreateUpstream(ctx context.Context, u *Upstream) error {
	err := s.db.WithContext(ctx).Create(u).Error
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return ErrConflict.Errorf("upstream server %q", u.Name)
	}
	if err != nil {
		return fmt.Errorf("create upstream %q: %w", u.Name, err)
	}
	return nil
}

// UpdateUpstream stores u's registration (where and how it runs, its
// limits and category) over the one of its id.
func (s *Store) UpdateUpstream(ctx context.Context, u *Upstream) error {
	res := s.db.WithContext(ctx).Model(u).Select("transport", "command", "env", "mounts", "url", "headers", "egress",
		"isolation", "max_concurrent", "idle_seconds", "category", "auth", "auth_secret").Updates(u)
	if res.Error != nil {
		return fmt.Errorf("update upstream %q: %w", u.Name, res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrNotFound.Errorf("upstream server %q", u.Name)
	}
	return nil
}

// Upstreams lists the registered upstreams by name.
func (s *Store) Upstreams(ctx context.Context) ([]Upstream, error) {
	var out []Upstream
	if err := s.db.WithContext(ctx).Order("name").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list upstreams: %w", err)
	}
	return out, nil
}

// UpstreamByName returns one upstream.
func (s *Store) UpstreamByName(ctx context.Context, name string) (*Upstream, error) {
	var u Upstream
	if err := s.db.WithContext(ctx).Where("name = ?", name).First(&u).Error; err != nil {
		return nil, notFound(err, "upstream server %q", name)
	}
	return &u, nil
}

// SetUpstreamDisabled disables (at) or enables (nil) an upstream.
func (s *Store) SetUpstreamDisabled(ctx context.Context, name string, at *time.Time) error {
	res := s.db.WithContext(ctx).Model(&Upstream{}).Where("name = ?", name).Update("disabled_at", at)
	if res.Error != nil {
		return fmt.Errorf("disable upstream %q: %w", name, res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrNotFound.Errorf("upstream server %q", name)
	}
	return nil
}

// DeleteUpstream removes an upstream and its tools' pins; run it in an
// Audited transaction with the retiring of the tools made from them.
func (s *Store) DeleteUpstream(ctx context.Context, u *Upstream) error {
	db := s.db.WithContext(ctx)
	if err := db.Where("upstream_id = ?", u.ID).Delete(&UpstreamTool{}).Error; err != nil {
		return fmt.Errorf("delete upstream %q: %w", u.Name, err)
	}
	if err := db.Delete(u).Error; err != nil {
		return fmt.Errorf("delete upstream %q: %w", u.Name, err)
	}
	return nil
}

// UpstreamTools lists the tools an upstream serves or served, by name.
func (s *Store) UpstreamTools(ctx context.Context, upstreamID uint) ([]UpstreamTool, error) {
	var out []UpstreamTool
	if err := s.db.WithContext(ctx).Where("upstream_id = ?", upstreamID).Order("remote").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list upstream tools: %w", err)
	}
	return out, nil
}

// SaveUpstreamTool creates or updates one upstream tool's row.
func (s *Store) SaveUpstreamTool(ctx context.Context, t *UpstreamTool) error {
	if err := s.db.WithContext(ctx).Save(t).Error; err != nil {
		return fmt.Errorf("save upstream tool %q: %w", t.Remote, err)
	}
	return nil
}

// SetUpstreamRefused stores what the last look at u's tools refused that
// is no one tool's (u.Refused).
func (s *Store) SetUpstreamRefused(ctx context.Context, u *Upstream) error {
	if err := s.db.WithContext(ctx).Model(u).Select("refused").Updates(u).Error; err != nil {
		return fmt.Errorf("upstream %q: %w", u.Name, err)
	}
	return nil
}
