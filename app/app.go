// Package app is the one assembly of the service: from a Config it builds
// the store, the embedder, the sandbox, the services over them and the
// HTTP handler, and runs the server with its background jobs. Main, the
// tests and the benchmarks all build the service here, and the App owns
// every goroutine it starts: Run returns only when they have all ended,
// and closes the store last.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"toolbelt/handlers"
	"toolbelt/handlers/mcpserver"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/audit"
	"toolbelt/services/browser"
	"toolbelt/services/callbacks"
	"toolbelt/services/catalog"
	"toolbelt/services/cluster"
	"toolbelt/services/embed"
	"toolbelt/services/invoke"
	"toolbelt/services/ops"
	"toolbelt/services/redact"
	"toolbelt/services/runners"
	"toolbelt/services/sandbox"
	"toolbelt/services/selection"
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
}

// App is the assembled service. Its fields are set by New and read-only
// after.
type App struct {
	Config   Config
	Log      *slog.Logger
	Store    *models.Store
	Authz    *access.Authz
	Accounts *access.Accounts
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
	// Redis is the server instances share counters, cached results and
	// change notices through (nil without Config.RedisURL).
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

	approvalSweep time.Duration

	chromium *browser.Browser
	mcp      *mcpserver.Server
	srv      *http.Server
	ln       net.Listener

	closeOnce sync.Once
	closeErr  error
	// storeClosing, when set, runs just before the store closes (tests).
	storeClosing func()
}

// New builds the service of cfg and listens on cfg.Addr; Run serves. An
// App that never runs must be closed.
func New(ctx context.Context, cfg Config, opts Options) (_ *App, err error) {
	logTo := opts.LogOutput
	if logTo == nil {
		logTo = os.Stderr
	}
	log, err := newLogger(cfg, logTo)
	if err != nil {
		return nil, err
	}
	stdout := opts.Stdout
	if stdout == nil {
		stdout = os.Stdout
	}
	if cfg.Instance == "" {
		cfg.Instance = cluster.DefaultInstance()
	}
	log = log.With("instance", cfg.Instance)
	a := &App{Config: cfg, Log: log, approvalSweep: cmp.Or(opts.ApprovalSweep, 30*time.Second)}
	defer func() {
		if err != nil {
			_ = a.Close()
		}
	}()

	if a.Store, err = openStore(ctx, cfg); err != nil {
		return nil, err
	}
	if err := a.openCluster(ctx, cfg); err != nil {
		return nil, err
	}
	if a.Authz, err = access.NewAuthz(ctx, a.Store, web.RolePolicies()); err != nil {
		return nil, err
	}
	guessStore, err := cluster.LimiterStore(a.Redis, a.Store, "guesses")
	if err != nil {
		return nil, err
	}
	if err := a.Authz.WithWatcher(a.Notices.CasbinWatcher()); err != nil {
		return nil, err
	}
	a.Accounts = access.NewAccounts(a.Store, a.Authz, log).WithGuessStore(guessStore)
	a.Accounts.OnRevoke(func(ctx context.Context) { a.Notices.Send(ctx, cluster.Keys) })
	a.Notices.On(cluster.Keys, a.Accounts.ForgetKeys)
	a.Registry = catalog.NewRegistry(a.Store, log)
	emb, embedNote, err := chooseEmbedder(ctx, cfg.OllamaURL, cfg.EmbedModel)
	if err != nil {
		return nil, err
	}
	if embedNote != "" {
		log.Warn(embedNote)
	}
	redactor, err := redact.New(secretValues(cfg))
	if err != nil {
		return nil, fmt.Errorf("load secret detection rules: %w", err)
	}
	var host ops.HostCaps
	if opts.Host == nil {
		host = ops.DetectHost()
	}
	// The data directory is the server's alone, but for the sandbox's
	// group when the server is root: commands run as uid 65534 must
	// traverse (never list) it to reach their work directories.
	if err := sandbox.ShareWithSandbox(cfg.DataDir); err != nil {
		return nil, err
	}
	box := sandbox.Probe(ctx, cfg.Sandbox, filepath.Join(cfg.DataDir, "sessions"), log)
	host.Sandbox = box.Available()
	if path, err := browser.Find(cfg.Chromium); err == nil {
		a.chromium = browser.New(path, log)
		host.Chromium = true // also when TOOLBELT_CHROMIUM names one off PATH
	} else {
		host.Chromium = false
		log.Warn("browser_navigate unavailable", "reason", err.Error())
	}
	if opts.Host != nil {
		host = *opts.Host
	}
	a.Metrics = ops.NewMetrics(cfg.Instance)
	a.Cluster = cluster.New(a.Store, cfg.Instance, log)
	a.Metrics.Gauge("toolbelt_leader", "1 while this instance leads: it runs the background jobs that run once in a cluster.", func() float64 {
		if a.Cluster.Leading() {
			return 1
		}
		return 0
	})
	a.Selector = selection.NewSelector(a.Store, a.Authz, emb, host, cfg.KeepLearned, log).WithMetrics(a.Metrics)
	catalogChanged := func() {
		a.Selector.MarkDirty()
		if a.Invoker != nil {
			a.Invoker.CatalogChanged()
		}
	}
	a.Registry.OnChange(func(ctx context.Context) {
		catalogChanged()
		a.Notices.Send(ctx, cluster.Catalog)
	})
	a.Notices.On(cluster.Catalog, catalogChanged)
	// Learned queries reach the other instances' rankings at once: the
	// message names the tools, each instance reads their queries again.
	a.Selector.OnLearned(func(ctx context.Context, tools []string) {
		a.Notices.SendMessage(ctx, cluster.Learned, strings.Join(tools, ","))
	})
	a.Notices.OnMessage(cluster.Learned, func(body string) { a.Selector.SyncLearnedLater(strings.Split(body, ",")) })
	if a.AdminKey, err = a.Accounts.Bootstrap(ctx, cfg.AdminKey); err != nil {
		return nil, err
	}
	// Renderings stored by an earlier revision of the renderer are made
	// again, before anything lists them.
	if _, err := a.Registry.RenderAgain(ctx); err != nil {
		return nil, fmt.Errorf("render tools again: %w", err)
	}
	seeded, err := a.Registry.SeedBuiltins(ctx)
	if err != nil {
		return nil, err
	}
	if len(seeded) > 0 {
		log.Info("built-in tools seeded", "tools", seeded)
	}
	if cfg.ToolsDir != "" {
		a.ToolFiles = catalog.NewToolFiles(cfg.ToolsDir, a.Registry, log)
		// Instances starting at once apply the files one after the other:
		// the second finds them applied and changes nothing.
		if err := a.Store.Exclusive(ctx, "toolfiles", func() error { return a.ToolFiles.Load(ctx) }); err != nil {
			return nil, err
		}
	}
	if err := a.Selector.Refresh(ctx); err != nil {
		return nil, err
	}
	log.Info("selection index ready", "embedder", a.Selector.Status(), "host", host)

	a.Runners = runners.New(cfg.DataDir, cfg.NetPolicy, log).WithSandbox(box).
		WithSessionQuota(runners.NewQuota(int64(cfg.SessionQuotaMB) << 20)).WithBrowser(a.chromium).
		WithSearch(cfg.SearXNG).WithSecrets(cfg.Secrets).WithMetrics(a.Metrics)
	callbackKey, err := callbacks.LoadKey(cfg.CallbackKey, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	// Results go where http_request may go, checked the same way.
	a.Callbacks = callbacks.New(a.Store, callbacks.NewSecrets(a.Store, callbackKey), cfg.NetPolicy, cfg.Callbacks, log)
	a.Invoker = invoke.NewInvoker(a.Store, a.Selector, a.Authz, redactor, a.Runners, cfg.DataDir, nil, log).
		WithMetrics(a.Metrics).WithCallbacks(a.Callbacks).WithSharedResults(a.Redis)
	limitStore, err := cluster.LimiterStore(a.Redis, a.Store, "limits")
	if err != nil {
		return nil, err
	}
	a.Invoker.WithRateLimitStore(limitStore)
	// Category limits hold in the cluster when instances share a queue:
	// in Redis when configured, else in the Postgres database.
	switch {
	case a.Redis != nil:
		a.Invoker.WithSharedQueues(cluster.RedisQueues(a.Redis, a.Notices, log))
	case a.Store.Shared():
		a.Invoker.WithSharedQueues(cluster.StoreQueues(a.Store, a.Notices, log))
	}
	a.Invoker.ReportQueues(a.Metrics)
	// Background calls are claimed under this instance's name; the others
	// reach the calls it runs (cancel, stream) through the notices.
	var bus invoke.Bus
	if a.Notices != nil {
		bus = a.Notices
	}
	a.Invoker.WithCluster(cfg.Instance, bus)
	a.Callbacks.WithOwner(a.Invoker.Owner())
	if opts.Sleep != nil {
		a.Invoker.WithSleep(opts.Sleep)
	}
	a.Invoker.ReportPendingApprovals(a.Metrics)
	a.Alerts = ops.NewAlerts(a.Store, cfg.Alerts, a.Metrics, log)
	a.Audit = audit.New(a.Store, cfg.AuditRetention, log)
	h := &handlers.Handler{
		Registry: a.Registry, Selector: a.Selector, Accounts: a.Accounts,
		Invoker: a.Invoker, CallbackSecrets: a.Callbacks.Secrets(), Health: ops.NewHealth(a.Store, a.Selector, embedNote).WithSandbox(box.Status()).WithToolFiles(a.ToolFiles).WithCluster(a.Cluster), Log: log,
		Links:  handlers.Links{Swagger: "/swagger/index.html", Healthz: "/healthz", Readyz: "/readyz"},
		Stats:  ops.NewStats(a.Store, a.Invoker.Flush),
		Alerts: a.Alerts,
		Audit:  a.Audit,
		// Documents fetched by URL follow the same SSRF policy as tool calls.
		OpenAPI: catalog.NewOpenAPIImporter(a.Registry, cfg.NetPolicy, log),
	}
	a.mcp = mcpserver.New(a.Selector, a.Invoker, Version, log)
	a.Handler = web.New(web.Deps{Handler: h, Accounts: a.Accounts, Authz: a.Authz, Log: log, Metrics: a.Metrics, MCP: a.mcp,
		TrustedProxies: cfg.TrustedProxies, MCPAllowedOrigins: cfg.MCPAllowedOrigins})
	a.srv = newHTTPServer(cfg.Addr, a.Handler, serverTimeouts)
	if a.ln, err = net.Listen("tcp", cfg.Addr); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	a.URL = baseURL(a.ln.Addr().String())
	if err := a.Invoker.Recover(ctx); err != nil {
		return nil, fmt.Errorf("recover calls: %w", err)
	}

	shared := ""
	if cfg.RedisURL != "" { // one instance on its own shares nothing: the banner does not say "redis none"
		shared = ", redis " + cfg.RedisName()
	}
	fmt.Fprintf(stdout, "\nToolbelt is running on %s (data in %s, database %s%s)\n", a.URL, cfg.DataDir, cfg.DatabaseName(), shared)
	switch {
	case a.AdminKey != "":
		fmt.Fprintf(stdout, "\n  Admin API key (shown once, store it now):\n    %s\n", a.AdminKey)
	case cfg.AdminKey != "":
		fmt.Fprintf(stdout, "\n  Admin API key: the one in TOOLBELT_ADMIN_KEY\n")
	}
	b := a.URL
	fmt.Fprintf(stdout, "\n  Home        %s/\n  Console     %s/admin\n  Swagger UI  %s/swagger/index.html\n  OpenAPI 3   %s/openapi.json\n  API         %s/api/v1\n  Health      %s/healthz\n  Readiness   %s/readyz\n\n", b, b, b, b, b, b, b)
	log.Info("listening", "addr", a.ln.Addr().String(), "data_dir", cfg.DataDir)
	return a, nil
}

// openStore opens the database cfg names: Postgres when a database URL
// is set, else the SQLite file in the data directory. The data directory
// is made either way: it holds the session work directories, the call
// journal and the callback key.
func openStore(ctx context.Context, cfg Config) (*models.Store, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	if cfg.DatabaseURL != "" {
		return models.OpenPostgres(ctx, cfg.DatabaseURL)
	}
	return models.Open(ctx, filepath.Join(cfg.DataDir, "toolbelt.db"))
}

// openCluster connects to what the instances share: Redis when
// configured, for counters, cached results and change notices; else, on
// Postgres, change notices over LISTEN/NOTIFY. One instance on SQLite
// shares nothing.
func (a *App) openCluster(ctx context.Context, cfg Config) (err error) {
	switch {
	case cfg.RedisURL != "":
		if a.Redis, err = cluster.OpenRedis(ctx, cfg.RedisURL); err != nil {
			return err
		}
		a.Notices, err = cluster.RedisNotices(ctx, a.Redis, a.Log)
	case cfg.DatabaseURL != "":
		a.Notices, err = cluster.PostgresNotices(ctx, cfg.DatabaseURL, a.Log)
	}
	return err
}

// Run serves HTTP and runs the background jobs until ctx ends or serving
// fails. Then it shuts down: it stops accepting, lets the calls in flight
// finish until Config.ShutdownTimeout and interrupts the rest, ends the
// MCP streams, stops the background jobs and waits for every goroutine it
// started, and closes the store last.
func (a *App) Run(ctx context.Context) error {
	defer a.Close()
	// The jobs stop once the calls are answered, not when ctx ends: the
	// calls draining may still need them.
	jobs, stopJobs := context.WithCancel(context.WithoutCancel(ctx))
	defer stopJobs()
	g, stopping := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := a.srv.Serve(a.ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-stopping.Done()
		defer stopJobs()
		return a.shutdown()
	})
	// The background jobs run on the leader alone (every instance on
	// SQLite's one): each would otherwise run once per instance.
	leaderJobs := []cluster.Job{
		func(ctx context.Context) { a.Invoker.SweepApprovals(ctx, a.approvalSweep) },
		a.Alerts.Run,
		a.pruneHourly,
	}
	if a.ToolFiles != nil {
		leaderJobs = append(leaderJobs, func(ctx context.Context) {
			if err := a.ToolFiles.Watch(ctx); err != nil {
				a.Log.Warn("tool files are not watched", "dir", a.Config.ToolsDir, "err", err)
			}
		})
	}
	g.Go(func() error {
		a.Cluster.Run(jobs, leaderJobs...)
		return nil
	})
	// Every instance renews the claims of the calls it runs and takes
	// over those of instances that died, and delivers callbacks, each
	// claimed by one instance at a time.
	g.Go(func() error {
		a.Invoker.RunClaims(jobs)
		return nil
	})
	g.Go(func() error {
		a.Callbacks.Run(jobs)
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	a.Log.Info("stopped")
	return nil
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
func (a *App) pruneHourly(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if err := a.Accounts.PruneConsoleSessions(ctx); err != nil {
			a.Log.Warn("prune console sessions", "err", err)
		}
		if err := a.Audit.Prune(ctx); err != nil {
			a.Log.Warn("prune the audit log", "err", err)
		}
		if _, err := a.Store.PruneRates(ctx, time.Now()); err != nil {
			a.Log.Warn("prune rate windows", "err", err) // counted in the database on Postgres without Redis
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Close releases what New built, in order: the listener, the calls still
// running (cancelled and recorded), the selector's goroutines, Chromium,
// and the store last. Run closes the App; an App that never ran is closed
// by whoever made it. It is safe to call twice.
func (a *App) Close() error {
	a.closeOnce.Do(func() {
		if a.ln != nil {
			_ = a.ln.Close() // Run's shutdown closed it already
		}
		a.Notices.Close() // before what its handlers touch

		if a.Invoker != nil {
			a.Invoker.Close(context.Background())
		}
		if a.Selector != nil {
			a.Selector.Close()
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
	})
	return a.closeErr
}

func newLogger(cfg Config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", cfg.LogLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch cfg.LogFormat {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: use json or text", cfg.LogFormat)
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
