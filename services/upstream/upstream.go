// Package upstream puts the MCP servers an organisation already runs
// behind Toolbelt: it connects to each registered server (a command in
// the sandbox over stdio, or a Streamable HTTP or SSE endpoint), pins the
// tools it serves as Toolbelt tools, holds later changes for an admin to
// accept, and runs calls of the mcp runner as tools/call upstream.
//
// Connections: one per server, or for a stdio server with session
// isolation one process per session, made on first use, kept while used
// and closed once idle (Run). A connection that fails is made again on
// the next call, after a backoff that grows while it keeps failing. A
// server that acts as each caller's person (an OAuth account, their own
// secrets: personal.go) has connections of one person each, never
// shared: the person is part of every connection's key.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
	"toolbelt/services/catalog"
	"toolbelt/services/netpolicy"
	"toolbelt/services/runners"
	"toolbelt/services/tooldef"
)

// Deps is what the manager works with.
type Deps struct {
	Store    *models.Store
	Registry *catalog.Registry
	// Net is where remote servers may be reached.
	Net netpolicy.Policy
	// Secrets are the configured secrets headers and environments may
	// reference as {{env.NAME}}.
	Secrets map[string]string
	// Auth discovers how people reach a server registered with auth
	// (nil: such a registration is refused).
	Auth Discoverer
	// Stdio starts a stdio server's process (nil: stdio servers cannot
	// run here).
	Stdio StdioStarter
	// Caps bound a session-isolated server's processes (zero: the
	// defaults).
	Caps ProcessCaps
	// Credentials gives each person's token at a server with Auth (nil:
	// such servers cannot be called here); NotConnected is the error its
	// Token wraps when the person has no account connected.
	Credentials  Credentials
	NotConnected error
	// Personal fills {{user.secret.NAME}} with the caller's person's own
	// secrets (nil: none can be).
	Personal PersonalSecrets
	// PublicURL is this server's, for the console pages a not-connected
	// error names.
	PublicURL string
	Log       *slog.Logger
}

// StdioStarter starts a stdio server's command and returns the transport
// to it; the process ends when the transport's connection closes. call is
// the call the process is started for when the server runs one process
// per session (its work directory is the session's), nil for a shared
// one; person is the principal a shared process of a personal server is
// started for (its own directory), 0 for one shared by everyone.
type StdioStarter interface {
	Start(ctx context.Context, u *models.Upstream, call *runners.Call, person uint, env []string) (mcp.Transport, error)
	// Mountable says why host, a mounts entry, cannot be shown to the
	// server's processes (nil: it can), checked at registration so an
	// admin reads which directory stops whom, not a failed start.
	Mountable(host string) error
}

// Manager holds the connections to upstream servers.
type Manager struct {
	d   Deps
	mu  sync.Mutex
	cns map[connKey]*conn
	// failures counts each connection's consecutive failures to connect,
	// and when the next try may be.
	failures map[connKey]failure
	// watchers are the goroutines that forget a connection once it ends.
	watchers sync.WaitGroup
	// known is what calls read of each server, by name (see callable).
	known map[string]known
	// closed is set by Close: no connection is made after it.
	closed bool
	// trying are the names servers are connected to under before they
	// are registered (tried, or being added): Reconcile leaves them be.
	trying map[string]bool
	// starting are the session connections being made, each closed once
	// made or failed: a second call for the session waits for it, and
	// the caps count it.
	starting map[connKey]chan struct{}
	// evicted and capRefused count, per server, the idle processes the
	// caps stopped and the calls they refused.
	evicted, capRefused map[string]uint64
}

// connKey names a connection: its server, the session of a
// session-isolated stdio process, and the person (principal ID) of a
// personal server's connection (0 for a shared one).
type connKey struct {
	server, session string
	person          uint
}

type failure struct {
	n     int
	until time.Time
	err   error
}

// New returns a manager over d; Run closes idle connections.
func New(d Deps) *Manager {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	return &Manager{d: d, cns: map[connKey]*conn{}, failures: map[connKey]failure{}, known: map[string]known{}, trying: map[string]bool{},
		starting: map[connKey]chan struct{}{}, evicted: map[string]uint64{}, capRefused: map[string]uint64{}}
}

// conn is one live MCP session to an upstream.
type conn struct {
	key connKey
	// reg is the registration the connection was made with.
	reg  *models.Upstream
	cs   *mcp.ClientSession
	end  context.CancelFunc // ends the connection's context
	sem  chan struct{}
	idle time.Duration
	mu   sync.Mutex
	used time.Time
	busy int
	// progress routes notifications/progress to the call whose token
	// they carry.
	progress sync.Map // token string → func(event string, data any)
	// auth is the bearer transport of a server with Auth (nil for
	// others): it says when the server refused the person's token.
	auth *bearer
	// hide are the person's own secrets the connection was made with
	// ({{user.secret.NAME}} in its env or headers): removed from what
	// the server answers, as the http runner removes those it sends.
	hide []string
}

// acquire is the connection for call (see connect), holding one of its
// slots; the caller releases it.
func (m *Manager) acquire(ctx context.Context, u *models.Upstream, call *runners.Call, as *models.Principal) (*conn, error) {
	c, err := m.connect(ctx, u, call, as)
	if err != nil {
		return nil, err
	}
	if err := c.acquire(ctx); err != nil {
		c.unclaim()
		return nil, err
	}
	return c, nil
}

// close ends the session (a stdio process exits) and its context.
func (c *conn) close() {
	_ = c.cs.Close()
	c.end()
}

// claim counts a call that will use the connection, from when connect
// hands it out (under the manager's lock, so neither the sweep nor a cap
// stops it meanwhile) until release.
func (c *conn) claim() {
	c.mu.Lock()
	c.busy++
	c.mu.Unlock()
}

func (c *conn) unclaim() {
	c.mu.Lock()
	c.busy--
	c.used = time.Now()
	c.mu.Unlock()
}

// acquire waits for a slot of a connection claimed by connect.
func (c *conn) acquire(ctx context.Context) error {
	select {
	case c.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *conn) release() {
	c.unclaim()
	<-c.sem
}

// idleSince is when the connection was last used, or zero while a call
// uses it or waits for it.
func (c *conn) idleSince() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy > 0 {
		return time.Time{}
	}
	return c.used
}

// MaxBackoff caps the wait before a connection that keeps failing is
// tried again.
const MaxBackoff = time.Minute

// connect returns the live connection for key, making it if needed.
// For a stdio server with session isolation, call is the call the
// connection is for (nil: the shared one, which lists the tools). as is
// the person a personal server's connection acts as: the call's
// principal, or the admin whose connection lists its tools; with none,
// or none connected, nothing is connected and the answer is
// UPSTREAM_NOT_CONNECTED.
func (m *Manager) connect(ctx context.Context, u *models.Upstream, call *runners.Call, as *models.Principal) (*conn, error) {
	key, asked := connKey{server: u.Name}, call
	if u.Transport == models.TransportStdio && u.Isolation == models.IsolationSession && call != nil {
		// A session belongs to a principal: its directory names both.
		key.session = call.Dir.Path
	} else {
		call = nil
	}
	if personal(u) {
		if as == nil {
			if u.Auth != nil {
				return nil, m.notConnected(u)
			}
			return nil, m.noSecret(personalSecrets(u)[0])
		}
		key.person = as.ID
		if u.Auth != nil {
			// Refused before any connection is made, and checked again at
			// each request (bearer).
			if _, err := m.token(ctx, u, tokenCall(asked, as)); err != nil {
				return nil, err
			}
		}
	} else {
		as = nil
	}
	m.mu.Lock()
	for {
		if c, ok := m.cns[key]; ok {
			c.claim()
			m.mu.Unlock()
			return c, nil
		}
		made, ok := m.starting[key]
		if !ok {
			break
		}
		m.mu.Unlock()
		select {
		case <-made: // made or failed: look again
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		m.mu.Lock()
	}
	if f, ok := m.failures[key]; ok && time.Now().Before(f.until) {
		m.mu.Unlock()
		return nil, &runners.Error{Code: models.CodeExecutionFailed, Retryable: true,
			Message:    fmt.Sprintf("upstream server %s failed to start or answer (%v); it is tried again in %s", u.Name, f.err, time.Until(f.until).Round(time.Second)),
			Suggestion: "Try again later, or choose another tool."}
	}
	if key.session != "" {
		victim, err := m.makeRoom(key)
		if err != nil {
			m.mu.Unlock()
			return nil, err
		}
		made := make(chan struct{})
		m.starting[key] = made
		defer func() {
			m.mu.Lock()
			delete(m.starting, key)
			m.mu.Unlock()
			close(made)
		}()
		if victim != nil {
			m.mu.Unlock()
			victim.close()
			m.mu.Lock()
		}
	}
	m.mu.Unlock()
	c, err := m.dial(ctx, u, key, call, as)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if e := redirected(u, err); e != nil {
			return nil, e
		}
		var said *runners.Error
		if errors.As(err, &said) && said.Code == models.CodeUpstreamNotConnected {
			return nil, said // the person's to fix: no backoff
		}
		if c != nil && c.auth != nil && c.auth.refused.Load() {
			return nil, m.refusal(u, c.auth)
		}
		f := m.failures[key]
		f.n++
		f.err = err
		f.until = time.Now().Add(min(time.Second<<min(f.n-1, 6), MaxBackoff))
		m.failures[key] = f
		return nil, &runners.Error{Code: models.CodeExecutionFailed, Retryable: true,
			Message: fmt.Sprintf("upstream server %s: %v", u.Name, err), Suggestion: "Try again later, or choose another tool."}
	}
	delete(m.failures, key)
	if m.closed {
		c.close()
		return nil, &runners.Error{Code: models.CodeExecutionFailed, Retryable: true,
			Message: "the server is shutting down", Suggestion: "Try again in a moment."}
	}
	if old, ok := m.cns[key]; ok { // another call connected meanwhile
		c.close()
		old.claim()
		return old, nil
	}
	m.cns[key] = c
	c.claim()
	m.watchers.Go(func() { m.forget(key, c) })
	return c, nil
}

// discard drops a connection that failed a call (its process died): the
// next call makes a new one at once.
func (m *Manager) discard(c *conn) {
	m.mu.Lock()
	if m.cns[c.key] == c {
		delete(m.cns, c.key)
	}
	m.mu.Unlock()
	c.close()
}

// forget drops a connection once its session ends (the process exited,
// the server closed it): the next call makes a new one.
func (m *Manager) forget(key connKey, c *conn) {
	err := c.cs.Wait()
	c.end()
	m.mu.Lock()
	if m.cns[key] == c {
		delete(m.cns, key)
	}
	m.mu.Unlock()
	if err != nil {
		m.d.Log.Warn("upstream connection ended", "server", key.server, "session", key.session, "err", err)
	}
}

// ConnectTimeout bounds connecting and the initialize handshake.
const ConnectTimeout = 30 * time.Second

func (m *Manager) dial(ctx context.Context, u *models.Upstream, key connKey, call *runners.Call, as *models.Principal) (*conn, error) {
	c := &conn{key: key, reg: u, sem: make(chan struct{}, max(u.MaxConcurrent, 1)), idle: time.Duration(u.IdleSeconds) * time.Second, used: time.Now()}
	for _, name := range personalSecrets(u) {
		v, err := m.personalSecret(ctx, as, name)
		if err != nil {
			return nil, err
		}
		c.hide = append(c.hide, v)
	}
	tr, ok := transportNamed(u.Transport)
	if !ok {
		return nil, fmt.Errorf("transport %q is not one of %s", u.Transport, strings.Join(TransportNames(), ", "))
	}
	t, err := tr.open(ctx, m, u, c, call, as)
	if err != nil {
		return nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolbelt", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		// A server saying its tools changed is looked at again at once:
		// a change is held pending, never taken as it comes.
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			if key.session != "" {
				return // the shared view is the one pinned
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.closed {
				return
			}
			m.watchers.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), ConnectTimeout)
				defer cancel()
				if _, err := m.Sync(ctx, u.Name, false, nil); err != nil {
					m.d.Log.Warn("upstream tools changed: look again", "server", u.Name, "err", err)
				}
			})
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			token := fmt.Sprint(req.Params.ProgressToken)
			if emit, ok := c.progress.Load(token); ok {
				emit.(func(string, any))("progress", map[string]any{"progress": req.Params.Progress, "total": req.Params.Total, "message": req.Params.Message})
			}
		},
	})
	// The context a transport connects with is its streams' lifetime
	// (the SSE transport's GET): the connection's own, ended by close; the
	// handshake has ConnectTimeout.
	life, end := context.WithCancel(context.WithoutCancel(ctx))
	timer := time.AfterFunc(ConnectTimeout, end)
	cs, err := client.Connect(life, t, nil)
	if !timer.Stop() {
		err = fmt.Errorf("no answer to initialize within %s", ConnectTimeout)
	}
	if err != nil {
		end()
		err = fmt.Errorf("connect: %w", err)
		if tail := m.stderrTail(u.Name); tail != "" {
			err = fmt.Errorf("%w; its standard error ends: %s", err, tail)
		}
		return c, err // c says whether the server refused the person's token
	}
	c.cs, c.end = cs, end
	m.d.Log.Info("upstream connected", "server", u.Name, "session", key.session, "person", key.person, "transport", u.Transport)
	return c, nil
}

// stderrTail is the last lines a stdio server wrote to its standard
// error, when its starter keeps them.
func (m *Manager) stderrTail(server string) string {
	st, ok := m.d.Stdio.(interface{ StderrTail(string) string })
	if !ok {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(st.StderrTail(server)), "\n")
	lines = lines[max(len(lines)-5, 0):]
	return strings.Join(lines, " | ")
}

// environment is a stdio server's environment: its own variables, each
// secret reference filled (as's own for {{user.secret.NAME}}), and
// nothing of the host's.
func (m *Manager) environment(ctx context.Context, u *models.Upstream, as *models.Principal) ([]string, error) {
	env := make([]string, 0, len(u.Env))
	for name, tmpl := range u.Env {
		v, err := m.expand(ctx, tmpl, as)
		if err != nil {
			return nil, fmt.Errorf("environment variable %s: %w", name, err)
		}
		env = append(env, name+"="+v)
	}
	return env, nil
}

// expand fills {{env.NAME}} references with configured secrets, and
// {{user.secret.NAME}} with the person as's own (a *runners.Error,
// UPSTREAM_NOT_CONNECTED, when they stored none).
func (m *Manager) expand(ctx context.Context, tmpl string, as *models.Principal) (string, error) {
	var bad error
	out := tooldef.Placeholder.ReplaceAllStringFunc(tmpl, func(s string) string {
		ref := tooldef.Placeholder.FindStringSubmatch(s)[1]
		if name, ok := strings.CutPrefix(ref, userSecret); ok {
			v, err := m.personalSecret(ctx, as, name)
			if err != nil && bad == nil {
				bad = err
			}
			return v
		}
		name, ok := strings.CutPrefix(ref, "env.")
		v := m.d.Secrets[name]
		if (!ok || v == "") && bad == nil {
			bad = fmt.Errorf("the secret %s is not configured on this server (list it in TOOLBELT_SECRETS)", name)
		}
		return v
	})
	return out, bad
}

// httpClient is the outbound policy's client, sending the server's
// headers with every request to its URL's origin and never elsewhere
// (see netpolicy.ClientSending).
func (m *Manager) httpClient(ctx context.Context, u *models.Upstream, as *models.Principal) (*http.Client, error) {
	h := http.Header{}
	for name, tmpl := range u.Headers {
		v, err := m.expand(ctx, tmpl, as)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", name, err)
		}
		h.Set(name, v)
	}
	// Streams stay open for as long as the session: no response
	// deadline beyond the one for headers.
	return m.d.Net.ClientSending(u.URL, h)
}

// SweepEvery is how often Run looks for idle connections.
const SweepEvery = 5 * time.Second

// Run closes connections idle longer than their server's idle time, and
// those of servers changed, disabled or deleted on another instance,
// until ctx ends; then it closes every connection.
func (m *Manager) Run(ctx context.Context) error {
	tick := time.NewTicker(SweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			m.Close()
			return nil
		case now := <-tick.C:
			m.Sweep(now)
			if err := m.Reconcile(ctx); err != nil && ctx.Err() == nil {
				m.d.Log.Warn("compare upstream connections with the registrations", "err", err)
			}
		}
	}
}

// Reconcile closes the connections whose server is no longer registered
// as they were made: deleted, disabled, or registered anew (on another
// instance of a cluster; this one's own changes close them at once), so
// no process keeps running a registration that is gone. It reads the
// registrations only while connections are open.
func (m *Manager) Reconcile(ctx context.Context) error {
	m.mu.Lock()
	made := map[string]*models.Upstream{}
	for key, c := range m.cns {
		if !m.trying[key.server] {
			made[key.server] = c.reg
		}
	}
	m.mu.Unlock()
	if len(made) == 0 {
		return nil
	}
	stored, err := m.d.Store.Upstreams(ctx)
	if err != nil {
		return err
	}
	now := map[string]*models.Upstream{}
	for i := range stored {
		now[stored[i].Name] = &stored[i]
	}
	for name, reg := range made {
		switch u := now[name]; {
		case u == nil:
			m.d.Log.Info("upstream server deleted: its connections closed", "server", name)
		case u.DisabledAt != nil:
			m.d.Log.Info("upstream server disabled: its connections closed", "server", name)
		case !sameRegistration(u, reg):
			m.d.Log.Info("upstream server registered anew: its connections closed", "server", name)
		default:
			continue
		}
		m.Drop(name)
	}
	return nil
}

// Sweep closes the connections idle longer than their server's idle
// time at now.
func (m *Manager) Sweep(now time.Time) {
	m.mu.Lock()
	var idle []*conn
	for key, c := range m.cns {
		if since := c.idleSince(); !since.IsZero() && now.Sub(since) > c.idle {
			delete(m.cns, key)
			idle = append(idle, c)
			m.d.Log.Info("upstream connection idle: closed", "server", key.server, "session", key.session)
		}
	}
	m.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
}

// Close closes every connection (stdio processes end).
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	all := m.cns
	m.cns = map[connKey]*conn{}
	m.mu.Unlock()
	for _, c := range all {
		c.close()
	}
	m.watchers.Wait()
}

// Drop closes a server's connections (after it was changed, disabled or
// deleted).
func (m *Manager) Drop(server string) {
	m.mu.Lock()
	var gone []*conn
	for key, c := range m.cns {
		if key.server == server {
			delete(m.cns, key)
			gone = append(gone, c)
		}
	}
	for key := range m.failures {
		if key.server == server {
			delete(m.failures, key)
		}
	}
	delete(m.known, server)
	m.mu.Unlock()
	for _, c := range gone {
		c.close()
	}
}

// Warm reports how many connections are open per server.
func (m *Manager) Warm() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for key := range m.cns {
		out[key.server]++
	}
	return out
}
