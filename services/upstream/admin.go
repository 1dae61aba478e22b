package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"toolbelt/models"
	"toolbelt/services/redact"
	"toolbelt/services/tooldef"
)

// Spec is an upstream server as an admin registers it.
type Spec struct {
	// Name is the server's name, the prefix of its tools' names.
	Name string `json:"name" example:"everything"`
	// Transport is how Toolbelt reaches the server: a command in the
	// sandbox (stdio), Streamable HTTP (http) or legacy HTTP+SSE (sse).
	Transport string `json:"transport" example:"http" enums:"stdio,http,sse"`
	// Command is the program and its arguments (stdio), run in the
	// sandbox.
	Command []string `json:"command,omitempty"`
	// Env is the stdio process's environment: literal values or
	// {{env.NAME}}, a configured secret.
	Env map[string]string `json:"env,omitempty"`
	// Mounts are host directories a stdio server reads (its code), by
	// name: each is shown read-only at /opt/<name> in the sandbox, so the
	// command can be ["node", "/opt/memory/dist/index.js"].
	Mounts map[string]string `json:"mounts,omitempty"`
	// URL is the endpoint (http, sse).
	URL string `json:"url,omitempty" example:"https://mcp.example.com/mcp"`
	// Headers are sent with every request (http, sse); credentials as
	// {{env.NAME}}.
	Headers map[string]string `json:"headers,omitempty"`
	// Egress are the hosts a stdio server may reach, each a host name or
	// address with an optional :port (80 and 443 without one), through
	// Toolbelt's proxy under the outbound policy of http_request; it has
	// no network of its own.
	Egress []string `json:"egress,omitempty" example:"api.github.com,example.org:8443"`
	// Network is refused: the switch that shared the host's network is
	// replaced by Egress.
	Network bool `json:"network,omitempty" swaggerignore:"true"`
	// Isolation is shared (one process) or session (one per session, in
	// its work directory); stdio only.
	Isolation     string `json:"isolation,omitempty" enums:"shared,session"`
	MaxConcurrent int    `json:"max_concurrent,omitempty" example:"4"`
	IdleSeconds   int    `json:"idle_seconds,omitempty" example:"300"`
	// Category is the category of its tools.
	Category string `json:"category" example:"api"`
	// Auth makes callers reach the server as the person they act for
	// (http, sse).
	Auth *AuthSpec `json:"auth,omitempty"`
}

// Limits of a registration.
const (
	MaxConcurrentLimit = 64
	MaxIdleSeconds     = 24 * 3600
)

// upstream is the registration s asks for.
func (s *Spec) upstream() *models.Upstream {
	return &models.Upstream{Name: s.Name, Transport: s.Transport, Command: s.Command, Env: s.Env, Mounts: s.Mounts, URL: s.URL,
		Headers: s.Headers, Egress: s.Egress, Isolation: s.Isolation, MaxConcurrent: s.MaxConcurrent,
		IdleSeconds: s.IdleSeconds, Category: s.Category, Auth: s.Auth.auth()}
}

// check validates s, filling defaults, and reports every problem at once.
func (s *Spec) check() error {
	var ps models.Problems
	s.Name = strings.TrimSpace(s.Name)
	if !tooldef.ServerNamePattern.MatchString(s.Name) {
		ps.Add("/name", "%q must be a lower-case letter, then up to 31 lower-case letters, digits or '-'", s.Name)
	}
	if s.Isolation == "" {
		s.Isolation = models.IsolationShared
	}
	if s.MaxConcurrent == 0 {
		s.MaxConcurrent = 4
	}
	if s.IdleSeconds == 0 {
		s.IdleSeconds = 300
	}
	if t, ok := transportNamed(s.Transport); ok {
		t.check(s, &ps)
	} else {
		ps.Add("/transport", "%q is not a transport; use %s", s.Transport, strings.Join(TransportNames(), ", "))
	}
	if s.Network {
		ps.Add("/network", "is replaced by egress: list the hosts the server may reach, e.g. [\"api.github.com\"]; without them it has no network")
	}
	if s.Isolation != models.IsolationShared && s.Isolation != models.IsolationSession {
		ps.Add("/isolation", "%q is not an isolation; use shared or session", s.Isolation)
	}
	if s.MaxConcurrent < 1 || s.MaxConcurrent > MaxConcurrentLimit {
		ps.Add("/max_concurrent", "must be 1 to %d", MaxConcurrentLimit)
	}
	if s.IdleSeconds < 1 || s.IdleSeconds > MaxIdleSeconds {
		ps.Add("/idle_seconds", "must be 1 to %d", MaxIdleSeconds)
	}
	if !slices.Contains(tooldef.Categories, s.Category) {
		ps.Add("/category", "%q is not a category; use one of %s", s.Category, strings.Join(tooldef.Categories, ", "))
	}
	s.Auth.check(s.Transport, &ps)
	if len(ps) > 0 {
		return &models.ValidationError{What: "upstream server", Problems: ps}
	}
	return nil
}

// validate is s.check and, for a stdio server, whether its processes can
// read each of its mounts (Deps.Stdio.Mountable), every problem reported
// at once.
func (m *Manager) validate(s *Spec) error {
	err := s.check()
	if s.Transport != models.TransportStdio || m.d.Stdio == nil {
		return err
	}
	var ps models.Problems
	var invalid *models.ValidationError
	if errors.As(err, &invalid) {
		ps = invalid.Problems
	} else if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(s.Mounts)) {
		dir := s.Mounts[name]
		if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
			continue // refused by check
		}
		if err := m.d.Stdio.Mountable(dir); err != nil {
			ps.Add("/mounts/"+tooldef.EscapePointer(name), "%s", err)
		}
	}
	if len(ps) > 0 {
		return &models.ValidationError{What: "upstream server", Problems: ps}
	}
	return nil
}

var mountName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,31}$`)

func envName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// checkSecretRefs: placeholders in a value may only be {{env.NAME}} (a
// configured secret) or {{user.secret.NAME}} (the caller's person's own),
// and a value that carries a credential must come from one (never
// stored): one the redactor's rules find a credential in, whatever its
// name, and any value of a name that says it is one (credential).
func checkSecretRefs(ptr, v string, credential bool, ps *models.Problems) {
	refs := tooldef.Placeholder.FindAllStringSubmatch(v, -1)
	for _, m := range refs {
		name, ok := strings.CutPrefix(m[1], "env.")
		if !ok {
			name, ok = strings.CutPrefix(m[1], userSecret)
		}
		if !ok || !envName(name) || strings.ToUpper(name) != name {
			ps.Add(ptr, "{{%s}}: only secrets may be referenced, as {{env.NAME}} (configured) or {{user.secret.NAME}} (each person's own) with NAME in upper case", m[1])
		}
	}
	if rule := redact.Credential(v); rule != "" {
		ps.Add(ptr, "holds a credential (%s): reference it as {{env.NAME}}, a secret listed in TOOLBELT_SECRETS; secrets are never stored", rule)
	} else if credential && len(refs) == 0 {
		ps.Add(ptr, "carries a credential: reference it as {{env.NAME}}, a secret listed in TOOLBELT_SECRETS; secrets are never stored")
	}
	if strings.ContainsAny(v, "\r\n\x00") {
		ps.Add(ptr, "must be one line")
	}
}

// Add registers an upstream server: it connects, lists the tools the
// server serves, and stores the server and its tools, each accepted as
// served (the admin adding it accepts what it serves now). A server that
// does not start or answer is refused and nothing is stored.
func (m *Manager) Add(ctx context.Context, s Spec, by *models.Principal) (*models.Upstream, *Report, error) {
	if err := m.validate(&s); err != nil {
		return nil, nil, err
	}
	u := s.upstream()
	if by != nil {
		u.CreatedBy = &by.ID
	}
	if _, err := m.d.Store.UpstreamByName(ctx, s.Name); err == nil {
		return nil, nil, models.ErrConflict.Errorf("upstream server %q", s.Name)
	}
	if err := m.discover(ctx, u, nil); err != nil {
		return nil, nil, err
	}
	// Tried before anything is stored.
	defer m.unregistered(u.Name)()
	l, err := m.list(ctx, u, by)
	if isNotConnected(err) && personal(u) {
		// Nobody can be connected to a server not yet registered: its
		// tools are listed once an admin connects (Sync).
		l, err = &listing{refused: map[string]string{}}, nil
	}
	if err != nil {
		m.Drop(u.Name)
		return nil, nil, unreachable(u, err.Error())
	}
	err = m.d.Store.Audited(ctx, models.AuditUpstreamAdd, func(tx *models.Store) (string, string, error) {
		return "upstream:" + u.Name, fmt.Sprintf("%s %s serving %d tools", u.Transport, describe(u), len(l.tools)+len(l.refused)+len(l.unnamed)), tx.CreateUpstream(ctx, u)
	})
	if err != nil {
		m.Drop(u.Name)
		return nil, nil, err
	}
	rep, err := m.compare(ctx, u, l, true, by)
	return u, rep, err
}

// Update changes a registered server's registration (s.Name's) to s.
// The new registration is tried first: a server that does not start or
// answer is refused and the old one stays. Then it is stored, the
// server's connections close (the next call starts it as registered
// now), and what it serves is compared with what was accepted: a changed
// tool is held pending for an admin, as a sync holds it, so a new
// command or URL cannot change a tool's definition unseen. A
// registration that is the same as stored changes nothing (nil report).
func (m *Manager) Update(ctx context.Context, s Spec, by *models.Principal) (*models.Upstream, *Report, error) {
	if err := m.validate(&s); err != nil {
		return nil, nil, err
	}
	cur, err := m.d.Store.UpstreamByName(ctx, s.Name)
	if err != nil {
		return nil, nil, err
	}
	next := s.upstream()
	next.ID, next.CreatedBy, next.CreatedAt, next.DisabledAt, next.Refused = cur.ID, cur.CreatedBy, cur.CreatedAt, cur.DisabledAt, cur.Refused
	if err := m.discover(ctx, next, cur); err != nil {
		return nil, nil, err
	}
	if sameRegistration(cur, next) {
		return cur, nil, nil
	}
	l, err := m.try(ctx, next, by)
	if isNotConnected(err) && personal(next) {
		// Stored as asked; what it serves is compared at the next sync
		// of a connected admin.
		l, err = nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	err = m.d.Store.Audited(ctx, models.AuditUpstreamUpdate, func(tx *models.Store) (string, string, error) {
		return "upstream:" + s.Name, fmt.Sprintf("%s %s, was %s %s", next.Transport, describe(next), cur.Transport, describe(cur)), tx.UpdateUpstream(ctx, next)
	})
	if err != nil {
		return nil, nil, err
	}
	m.Drop(s.Name)
	if next.Category != cur.Category || next.Transport != cur.Transport || len(next.Egress) > 0 != (len(cur.Egress) > 0) {
		// What its tools' definitions take from the server changed.
		if err := m.republishAll(ctx, next, by); err != nil {
			return nil, nil, err
		}
	}
	if l == nil {
		return next, nil, nil
	}
	rep, err := m.compare(ctx, next, l, false, by)
	return next, rep, err
}

// republishAll publishes the accepted definition of each of u's tools in
// service again, as its next version made with u as registered now.
func (m *Manager) republishAll(ctx context.Context, u *models.Upstream, by *models.Principal) error {
	rows, err := m.d.Store.UpstreamTools(ctx, u.ID)
	if err != nil {
		return err
	}
	for i := range rows {
		if r := &rows[i]; r.Tool != "" && r.Status == models.UpstreamToolActive && r.DisabledAt == nil {
			if err := m.republish(ctx, u, r, by); err != nil {
				return fmt.Errorf("publish %s again: %w", r.Tool, err)
			}
		}
	}
	return nil
}

// sameRegistration reports whether a and b register a server alike:
// where and how it runs, its limits and category.
func sameRegistration(a, b *models.Upstream) bool {
	reg := func(u *models.Upstream) models.Upstream {
		return models.Upstream{Name: u.Name, Transport: u.Transport, Command: u.Command, Env: u.Env, Mounts: u.Mounts, URL: u.URL,
			Headers: u.Headers, Egress: u.Egress, Isolation: u.Isolation, MaxConcurrent: u.MaxConcurrent,
			IdleSeconds: u.IdleSeconds, Category: u.Category, Auth: askedAuth(u)}
	}
	return reflect.DeepEqual(normalized(reg(a)), normalized(reg(b)))
}

// normalized makes empty maps and lists nil, as the store reads them
// back either way.
func normalized(u models.Upstream) models.Upstream {
	if len(u.Command) == 0 {
		u.Command = nil
	}
	if len(u.Env) == 0 {
		u.Env = nil
	}
	if len(u.Mounts) == 0 {
		u.Mounts = nil
	}
	if len(u.Headers) == 0 {
		u.Headers = nil
	}
	if len(u.Egress) == 0 {
		u.Egress = nil
	}
	return u
}

// unreachable is a server that did not start or answer, refused at the
// field that says where it runs.
func unreachable(u *models.Upstream, msg string) error {
	where := "/url"
	if u.Transport == models.TransportStdio {
		where = "/command"
	}
	return &models.ValidationError{What: "upstream server", Problems: []models.Problem{{Pointer: where, Message: msg}}}
}

// Try connects to a server as Add would and lists the tools it serves,
// storing nothing: the console's "test the connection".
func (m *Manager) Try(ctx context.Context, s Spec) ([]string, error) {
	if err := m.validate(&s); err != nil {
		return nil, err
	}
	// Under a name of its own, so no registered server's connection is
	// used or disturbed.
	l, err := m.try(ctx, s.upstream(), nil)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(l.tools))
	for i, t := range l.tools {
		names[i] = t.Name
	}
	return names, nil
}

// try lists the tools u would serve under a name of its own, so no
// registered server's connection is used or disturbed, and forgets the
// connection after: what Add or Update would find, refused at the field
// that says where it runs when it does not start or answer.
func (m *Manager) try(ctx context.Context, u *models.Upstream, by *models.Principal) (*listing, error) {
	name := u.Name
	tried := *u
	tried.Name = "try-" + models.NewID()
	defer m.unregistered(tried.Name)()
	defer m.forgetTried(tried.Name)
	l, err := m.list(ctx, &tried, by)
	if isNotConnected(err) {
		return nil, err
	}
	if err != nil {
		return nil, unreachable(u, strings.ReplaceAll(err.Error(), tried.Name, name))
	}
	return l, nil
}

// unregistered marks name as a server connected to before it is
// registered (tried, or being added), whose connections Reconcile must
// leave alone, until the returned func is called.
func (m *Manager) unregistered(name string) func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.trying[name] = true
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.trying, name)
	}
}

// forgetTried drops a server that was only tried and removes what it left
// here (its work directory, its standard error).
func (m *Manager) forgetTried(name string) {
	m.Drop(name)
	if f, ok := m.d.Stdio.(interface{ Forget(string) error }); ok {
		if err := f.Forget(name); err != nil {
			m.d.Log.Warn("remove a tried upstream's work directory", "server", name, "err", err)
		}
	}
}

// describe names where a server runs, without its secrets.
func describe(u *models.Upstream) string {
	if u.Transport == models.TransportStdio {
		return strings.Join(u.Command, " ")
	}
	return u.URL
}

// SetDisabled disables or enables a server: a disabled server's tools
// refuse calls and its connections close.
func (m *Manager) SetDisabled(ctx context.Context, name string, disabled bool) error {
	var at *time.Time
	action := models.AuditUpstreamEnable
	if disabled {
		now := time.Now().UTC()
		at, action = &now, models.AuditUpstreamDisable
	}
	err := m.d.Store.Audited(ctx, action, func(tx *models.Store) (string, string, error) {
		return "upstream:" + name, "", tx.SetUpstreamDisabled(ctx, name, at)
	})
	if err == nil {
		m.Drop(name)
	}
	return err
}

// Delete removes a server and retires the tools made from it (their
// history stays).
func (m *Manager) Delete(ctx context.Context, name string) error {
	err := m.d.Store.Audited(ctx, models.AuditUpstreamDelete, func(tx *models.Store) (string, string, error) {
		u, err := tx.UpstreamByName(ctx, name)
		if err != nil {
			return "", "", err
		}
		rows, err := tx.UpstreamTools(ctx, u.ID)
		if err != nil {
			return "", "", err
		}
		var retired []string
		for _, r := range rows {
			if r.Tool != "" {
				if err := tx.RetireTool(ctx, r.Tool); err != nil && !errors.Is(err, models.ErrNotFound) {
					return "", "", err
				}
				retired = append(retired, r.Tool)
			}
		}
		return "upstream:" + name, fmt.Sprintf("retired %d tools: %s", len(retired), strings.Join(retired, ", ")), tx.DeleteUpstream(ctx, u)
	})
	if err == nil {
		m.Drop(name)
		m.d.Registry.Changed(ctx)
	}
	return err
}

// ApplyServer registers the server a tool file defines (spec, read as
// the REST API reads a registration: unknown fields are errors), or
// changes its registration to spec (Update: changed tools wait for an
// admin). A file that registers a server as it is changes nothing, so a
// restart starts no process.
func (m *Manager) ApplyServer(ctx context.Context, spec json.RawMessage) error {
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return fmt.Errorf("mcp_server is not an MCP server's registration: %w", err)
	}
	_, err := m.d.Store.UpstreamByName(ctx, s.Name)
	switch {
	case errors.Is(err, models.ErrNotFound):
		_, _, err = m.Add(ctx, s, nil)
	case err == nil:
		_, _, err = m.Update(ctx, s, nil)
	}
	return err
}

// RemoveServer deletes the server of a tool file that is gone.
func (m *Manager) RemoveServer(ctx context.Context, name string) error { return m.Delete(ctx, name) }
