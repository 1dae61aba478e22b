// Package app is the one assembly of the service: from a Config it builds
// the store, the embedder, the sandbox, the services over them and the
// HTTP handler, and runs the server with its background jobs. Main, the
// tests and the benchmarks all build the service here, and the App owns
// every goroutine it starts: Run returns only when they have all ended,
// and closes the store last.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"toolbelt/handlers/mcpserver"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/audit"
	"toolbelt/services/authserver"
	"toolbelt/services/browser"
	"toolbelt/services/callbacks"
	"toolbelt/services/catalog"
	"toolbelt/services/cluster"
	"toolbelt/services/connect"
	"toolbelt/services/embed"
	"toolbelt/services/identity"
	"toolbelt/services/invoke"
	"toolbelt/services/ops"
	"toolbelt/services/runners"
	"toolbelt/services/selection"
	"toolbelt/services/upstream"
	"toolbelt/services/vault"
	"toolbelt/web"
)

// Version is the server version MCP clients are told; it follows the
// OpenAPI document's.
const Version = "1.0"

// Options change how New builds the service where a test or a benchmark
// needs it to; the zero value is what main runs.
type Options struct {
	// Stdout receives the start-up banner (os.Stdout when nil).
	Stdout io.Writer
	// LogOutput receives the log, in the level and format of the config
	// (os.Stderr when nil).
	LogOutput io.Writer
	// Host, when set, is what the host claims to run, instead of what is
	// detected (selection hides tools the host cannot run).
	Host *ops.HostCaps
	// Sleep, when set, replaces the wait between retries of a call.
	Sleep func(context.Context, time.Duration) error
	// ApprovalSweep, when set, replaces how often the leader expires
	// approvals (30 s).
	ApprovalSweep time.Duration
	// QueueLease, when set, replaces how long a shared queue's slot or
	// place holds without a renewal (cluster.QueueLease), for tests
	// whose instances never die on a machine that may pause past it.
	QueueLease time.Duration
}

// App is the assembled service. Its fields are set by New and read-only
// after.
type App struct {
	Config   Config
	Log      *slog.Logger
	Store    *models.Store
	Authz    *access.Authz
	Accounts *access.Accounts
	// People make and keep the principals of the external OpenID
	// provider's people (nil without TOOLBELT_OIDC_ISSUER).
	People   *identity.People
	Registry *catalog.Registry
	Selector *selection.Selector
	Invoker  *invoke.Invoker
	// Runners execute what passes the invoker's chain, on the sandbox,
	// Chromium and the egress policy.
	Runners *runners.Table
	Alerts  *ops.Alerts
	Metrics *ops.Metrics
	// Audit reads and prunes the audit log.
	Audit *audit.Log
	// Callbacks deliver the results of calls that name a callback_url.
	Callbacks *callbacks.Deliverer
	// Vault seals what lets Toolbelt act as a person elsewhere: their
	// connected accounts' tokens and the secrets they store.
	Vault *vault.Vault
	// Connect is Toolbelt as the OAuth client of upstream servers: people's
	// connected accounts and their tokens.
	Connect *connect.Service
	// Secrets are the values people store for themselves, sealed by
	// Vault, that http tools send as {{user.secret.NAME}}.
	Secrets *vault.Secrets
	// Upstreams connect to the MCP servers whose tools Toolbelt serves.
	Upstreams *upstream.Manager
	// Redis is the server instances share cached results, category
	// queues and change notices through, falling back to Postgres while it
	// does not answer (nil without Config.RedisURL).
	Redis *redis.Client
	// Notices carry change notices between instances: over Redis, or
	// over Postgres LISTEN/NOTIFY without it (nil on SQLite).
	Notices *cluster.Notices
	// ToolFiles applies the tool files of Config.ToolsDir (nil without).
	ToolFiles *catalog.ToolFiles
	// Cluster elects the instance that runs the background jobs that must
	// run once among instances over one database.
	Cluster *cluster.Elector
	// Handler is the HTTP handler of the whole service (web.New).
	Handler http.Handler
	// AdminKey is the admin key this start created, shown once; empty
	// when the database had one or the config brought it.
	AdminKey string
	// URL is where the server listens, as a person on this machine would
	// open it.
	URL string
	// PublicURL is the server's origin as its clients reach it
	// (Config.PublicURL, or URL): the issuer of the tokens it issues and
	// the name of its OAuth resources.
	PublicURL string

	// tokens verify the access tokens that are not API keys, and
	// authServers are their issuers (the protected-resource metadata
	// lists them); the identity modes fill both.
	tokens      []access.TokenVerifier
	authServers []string
	// authServer is the embedded authorization server
	// (TOOLBELT_OAUTH=embedded), nil otherwise.
	authServer *authserver.Server

	approvalSweep time.Duration
	queueLease    time.Duration
	// outage is since when the database has not answered: the key check
	// and readiness decide by it together (Config.OutageGrace).
	outage *access.Outage

	chromium *browser.Browser
	mcp      *mcpserver.Server
	srv      *http.Server
	ln       net.Listener
	// logBuffer holds log lines for a file or pipe (nil when the log
	// goes to a terminal or to Options.LogOutput); Close flushes it.
	logBuffer *logBuffer
	// requestLine writes the access lines of a JSON log by hand (nil
	// for text, or when info lines are off).
	requestLine func(web.RequestLine) bool

	closeOnce sync.Once
	closeErr  error
	// storeClosing, when set, runs just before the store closes (tests).
	storeClosing func()
}

// New builds the service of cfg and listens on cfg.Addr; Run serves. An
// App that never runs must be closed. Each stage builds on what the ones
// before it made; nothing is set on a service after it is made, and
// nothing starts a goroutine but Run.
func New(ctx context.Context, cfg Config, opts Options) (_ *App, err error) {
	a, err := newApp(cfg, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = a.Close()
		}
	}()
	// Listening first names the server (a.URL, and the public URL by
	// default) before the services that put the name in what they issue.
	if err := a.listen(); err != nil {
		return nil, err
	}
	if err := a.openStore(ctx); err != nil {
		return nil, err
	}
	if err := a.openCluster(ctx); err != nil {
		return nil, err
	}
	if err := a.buildAccess(ctx); err != nil {
		return nil, err
	}
	a.buildOIDC()
	env, err := a.probeHost(ctx, opts.Host)
	if err != nil {
		return nil, err
	}
	a.buildCatalog(env)
	if err := a.buildInvoke(env, opts.Sleep); err != nil {
		return nil, err
	}
	a.connect()
	if err := a.prepare(ctx, env); err != nil {
		return nil, err
	}
	a.buildHandler(env)
	a.banner(opts.Stdout)
	return a, nil
}

// Run recovers the calls an earlier run left, then serves HTTP and runs
// the background loops until ctx ends or serving fails. Then it shuts
// down: it stops accepting, lets the calls in flight finish until
// Config.ShutdownTimeout and interrupts the rest, ends the MCP streams,
// stops the loops and waits for them, and closes the store last.
func (a *App) Run(ctx context.Context) error {
	defer a.Close()
	// The loops stop once the calls are answered, not when ctx ends: the
	// calls draining may still need them.
	loops := startJobs(context.WithoutCancel(ctx))
	for _, loop := range a.loops() {
		loops.Go(loop)
	}
	// Nothing is served before the calls are recovered: /readyz answers
	// once they are. The loops run meanwhile (the call records are
	// written in batches). Stopped meanwhile, Run stops: what is left to
	// recover waits for the next start, or another instance.
	if err := a.Invoker.Recover(ctx); err != nil {
		_ = loops.stop()
		if ctx.Err() != nil {
			a.Log.Info("stopped while recovering calls")
			return nil
		}
		return fmt.Errorf("recover calls: %w", err)
	}
	g, stopping := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := a.srv.Serve(a.ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-stopping.Done()
		defer loops.stop()
		return a.shutdown()
	})
	err := g.Wait()
	if loopErr := loops.stop(); err == nil {
		err = loopErr
	}
	if err != nil {
		return err
	}
	a.Log.Info("stopped")
	return nil
}

// loops are every background loop of the App, each a Run(ctx) that
// returns when ctx ends. Every instance hears the change notices (none on
// SQLite: that Run returns at once), writes its call and selection
// records, renews the claims of the calls it runs and takes over those of
// instances that died, and delivers callbacks, each claimed by one
// instance at a time. The other jobs run on the leader alone (every
// instance on SQLite's one): each would otherwise run once per instance.
func (a *App) loops() []func(context.Context) error {
	leaderJobs := []cluster.Job{
		func(ctx context.Context) error { return a.Invoker.SweepApprovals(ctx, a.approvalSweep) },
		a.Alerts.Run,
		a.pruneHourly,
	}
	if a.ToolFiles != nil {
		leaderJobs = append(leaderJobs, func(ctx context.Context) error {
			if err := a.ToolFiles.Watch(ctx); err != nil {
				a.Log.Warn("tool files are not watched", "dir", a.Config.ToolsDir, "err", err)
			}
			return nil
		})
	}
	return []func(context.Context) error{
		a.Notices.Run,
		a.Invoker.Run,
		a.Selector.Run,
		func(ctx context.Context) error { return a.Cluster.Run(ctx, leaderJobs...) },
		a.Callbacks.Run,
		a.Upstreams.Run,
	}
}

// shutdown stops accepting at once, lets calls in flight finish until the
// deadline, then cancels them (recorded as interrupted) and lets their
// answers go out before the connections close.
func (a *App) shutdown() error {
	a.Log.Info("shutting down", "deadline", a.Config.ShutdownTimeout.String())
	drain, cancel := context.WithTimeout(context.Background(), a.Config.ShutdownTimeout)
	defer cancel()
	serverDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), a.Config.ShutdownTimeout+15*time.Second)
		defer cancel()
		serverDone <- a.srv.Shutdown(ctx)
	}()
	a.Invoker.Shutdown(drain)
	// The calls are answered; MCP event streams would otherwise hold the
	// shutdown until its deadline.
	a.mcp.Close()
	if err := <-serverDone; err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	return nil
}

// pruneHourly deletes expired console sessions (lookups ignore them
// meanwhile), the audit log entries past their retention and the ended
// rate-limit windows, now and then hourly, until ctx ends.
func (a *App) pruneHourly(ctx context.Context) error {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if err := a.Accounts.PruneConsoleSessions(ctx); err != nil {
			a.Log.Warn("prune console sessions", "err", err)
		}
		if a.authServer != nil {
			if err := a.authServer.Prune(ctx); err != nil {
				a.Log.Warn("prune oauth requests and tokens", "err", err)
			}
		}
		if err := a.Audit.Prune(ctx); err != nil {
			a.Log.Warn("prune the audit log", "err", err)
		}
		if _, err := a.Store.PruneRates(ctx, time.Now()); err != nil {
			a.Log.Warn("prune rate windows", "err", err) // counted in the database on Postgres without Redis
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Close releases what New built, in order: the listener, the connections
// of the change notices, the calls still running (cancelled and recorded)
// and the call journal, Redis, Chromium, and the store last. Run closes
// the App once its loops ended; an App that never ran is closed by
// whoever made it. It is safe to call twice.
func (a *App) Close() error {
	a.closeOnce.Do(func() {
		if a.ln != nil {
			_ = a.ln.Close() // Run's shutdown closed it already
		}
		a.Notices.Close() // before what its handlers touch

		if a.Invoker != nil {
			a.Invoker.Close(context.Background())
		}
		if a.Upstreams != nil {
			a.Upstreams.Close()
		}
		if a.Redis != nil {
			_ = a.Redis.Close()
		}
		if a.chromium != nil {
			a.chromium.Close()
		}
		if a.storeClosing != nil {
			a.storeClosing()
		}
		if a.Store != nil {
			a.closeErr = a.Store.Close()
		}
		if a.logBuffer != nil {
			a.logBuffer.Flush()
		}
	})
	return a.closeErr
}

// newLogger writes JSON for log collectors and text for people, in the
// format logFormat chose. Durations are written with their unit
// ("1.5ms"), in JSON too, where slog would write bare nanoseconds.
func newLogger(cfg Config, format string, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", cfg.LogLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		opts.ReplaceAttr = durationWithUnit
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// logFormat is the format cfg.LogFormat names for the output w: "auto"
// (the default) picks text when w is a terminal, JSON otherwise.
func logFormat(cfg Config, w io.Writer) (string, error) {
	switch cfg.LogFormat {
	case "json", "text":
		return cfg.LogFormat, nil
	case "auto":
		if isTerminal(w) {
			return "text", nil
		}
		return "json", nil
	}
	return "", fmt.Errorf("log format %q: use auto, json or text", cfg.LogFormat)
}

// durationWithUnit writes a duration as "1.5ms" rather than 1500000.
func durationWithUnit(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// isTerminal reports whether w is a terminal (not a file, a pipe or
// /dev/null).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// chooseEmbedder returns Ollama when a URL is configured and it answers,
// and the built-in embedder otherwise, with a note saying why.
func chooseEmbedder(ctx context.Context, url, model string) (embed.Embedder, string, error) {
	if url == "" {
		return embed.NewBuiltin(), "", nil
	}
	o, err := embed.NewOllama(embed.OllamaConfig{URL: url, Model: model})
	if err != nil {
		return nil, "", err
	}
	probeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := o.Probe(probeCtx); err != nil {
		b := embed.NewBuiltin()
		return b, fmt.Sprintf("Ollama is not usable (%v); using the built-in embedder %s", err, b.Model()), nil
	}
	return o, "", nil
}
