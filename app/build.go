package app

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"toolbelt/handlers"
	"toolbelt/handlers/console"
	"toolbelt/handlers/mcpserver"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/audit"
	"toolbelt/services/authserver"
	"toolbelt/services/browser"
	"toolbelt/services/callbacks"
	"toolbelt/services/catalog"
	"toolbelt/services/clientdoc"
	"toolbelt/services/cluster"
	"toolbelt/services/connect"
	"toolbelt/services/embed"
	"toolbelt/services/invoke"
	"toolbelt/services/ops"
	"toolbelt/services/redact"
	"toolbelt/services/runners"
	"toolbelt/services/sandbox"
	"toolbelt/services/selection"
	"toolbelt/services/upstream"
	"toolbelt/services/vault"
	"toolbelt/web"
)

// The stages of New, in its order. Each sets the App's fields it names
// from those the stages before it set, and starts no goroutine.

// hostEnv is what probeHost found: what the host runs tools on, and the
// embedder the index is built with.
type hostEnv struct {
	host      ops.HostCaps
	box       *sandbox.Sandbox
	emb       embed.Embedder
	embedNote string // why the embedder is not the configured one ("" when it is)
}

// newApp is the App of cfg with its log and metrics, before anything is
// opened.
func newApp(cfg Config, opts Options) (*App, error) {
	if err := cfg.checkKeys(); err != nil {
		return nil, err
	}
	out := opts.LogOutput
	if out == nil {
		out = os.Stderr
	}
	format, err := logFormat(cfg, out)
	if err != nil {
		return nil, err
	}
	// The log handler and the access lines (accessLine) share the
	// output, so it takes one write at a time. Stderr that is not a
	// terminal (a file, a pipe) takes the lines in batches; a terminal,
	// and the tests' outputs, as they come.
	var buffered *logBuffer
	var logTo io.Writer
	if opts.LogOutput == nil && !isTerminal(out) {
		buffered = newLogBuffer(out)
		logTo = buffered
	} else {
		logTo = &lockedWriter{w: out}
	}
	log, err := newLogger(cfg, format, logTo)
	if err != nil {
		return nil, err
	}
	if buffered != nil {
		log = slog.New(flushOnWarn{log.Handler(), buffered})
	}
	if cfg.Instance == "" {
		cfg.Instance = cluster.DefaultInstance()
	}
	a := &App{Config: cfg, Log: log.With("instance", cfg.Instance), Metrics: ops.NewMetrics(cfg.Instance),
		approvalSweep: cmp.Or(opts.ApprovalSweep, 30*time.Second), queueLease: opts.QueueLease, logBuffer: buffered}
	if format == "json" && log.Enabled(context.Background(), slog.LevelInfo) {
		a.requestLine = newAccessLine(logTo, cfg.Instance).write
	}
	return a, nil
}

// openStore opens the database the config names: Postgres when a
// database URL is set, else the SQLite file in the data directory. The
// data directory is made either way: it holds the session work
// directories, the call journal and the callback key.
func (a *App) openStore(ctx context.Context) (err error) {
	if err := os.MkdirAll(a.Config.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	a.Store, err = openDatabase(ctx, a.Config)
	return err
}

// openDatabase opens cfg's database: Postgres when a database URL is
// set, else the SQLite file of the data directory (sqlitePath).
func openDatabase(ctx context.Context, cfg Config) (*models.Store, error) {
	if cfg.DatabaseURL != "" {
		return models.OpenPostgres(ctx, cfg.DatabaseURL)
	}
	return models.Open(ctx, sqlitePath(cfg))
}

// sqlitePath is the SQLite database of cfg's data directory.
func sqlitePath(cfg Config) string { return filepath.Join(cfg.DataDir, "toolbelt.db") }

// openCluster connects to what the instances share: Redis when
// configured, for the queues, cached results and change notices, which
// on Postgres also travel over LISTEN/NOTIFY, so they get through while
// Redis does not answer; else, on Postgres, change notices over
// LISTEN/NOTIFY alone. One instance on SQLite shares nothing. It makes
// the elector of the instance that runs the jobs that run once among
// instances over one database.
func (a *App) openCluster(ctx context.Context) (err error) {
	cfg := a.Config
	a.Cluster = cluster.New(a.Store, cfg.Instance, a.Log)
	a.Metrics.Gauge("toolbelt_leader", "1 while this instance leads: it runs the background jobs that run once in a cluster.", func() float64 {
		if a.Cluster.Leading() {
			return 1
		}
		return 0
	})
	switch {
	case cfg.RedisURL != "" && cfg.DatabaseURL != "":
		if a.Redis, err = cluster.OpenRedis(ctx, cfg.RedisURL); err != nil {
			return err
		}
		a.Notices, err = cluster.SharedNotices(ctx, a.Redis, cfg.DatabaseURL, a.Log)
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

// buildAccess makes the enforcer and the accounts. Policy changes, wrong
// API keys and revoked keys are shared with the other instances.
func (a *App) buildAccess(ctx context.Context) (err error) {
	a.Authz, err = access.OpenAuthz(ctx, access.AuthzDeps{Store: a.Store, Roles: web.RolePolicies(), Scopes: web.ScopePolicies(), Watcher: a.Notices.CasbinWatcher()})
	if err != nil {
		return err
	}
	a.outage = access.NewOutage(a.Config.OutageGrace)
	a.Accounts = access.NewAccounts(access.AccountsDeps{Store: a.Store, Authz: a.Authz, Log: a.Log, Outage: a.outage,
		GuessStore: cluster.LimiterStore(a.Store, "guesses"),
		OnRevoke: []func(context.Context){func(ctx context.Context) {
			a.Notices.Send(ctx, cluster.Keys)
			if a.authServer != nil { // a disabled principal's tokens stop too
				a.authServer.Tokens().Forget()
			}
		}},
		// A disabled or deleted principal's connections are revoked
		// upstream too (Connect is built later, before any request).
		OnGone: []func(context.Context, []models.Credential){func(ctx context.Context, gone []models.Credential) {
			if a.Connect != nil {
				a.Connect.Revoke(ctx, gone)
			}
		}}})
	if err := a.openVault(ctx); err != nil {
		return err
	}
	return a.buildAuthServer(ctx)
}

// buildAuthServer builds the embedded OAuth authorization server
// (TOOLBELT_OAUTH=embedded): its tokens are verified beside keys, it is
// the issuer the protected-resource metadata names, and a token revoked
// on another instance is forgotten here on the same notice as keys.
func (a *App) buildAuthServer(ctx context.Context) error {
	if a.Config.OAuth != OAuthEmbedded {
		return nil
	}
	key, err := authserver.LoadKey(a.Config.OAuthKey, a.Config.DataDir)
	if err != nil {
		return err
	}
	a.authServer, err = authserver.New(ctx, authserver.Deps{Store: a.Store, PublicURL: a.PublicURL, Key: key, DCR: a.Config.OAuthDCR, Log: a.Log,
		// Metadata documents are fetched under the outbound policy: no
		// loopback or private address unless allowed.
		ClientDocs:    clientdoc.NewFetcher(a.Config.NetPolicy.Client(), clientdoc.Options{}),
		OnRevoke:      []func(context.Context){func(ctx context.Context) { a.Notices.Send(ctx, cluster.Keys) }},
		Registrations: cluster.LimiterStore(a.Store, "oauth_registrations")})
	if err != nil {
		return err
	}
	a.tokens = append(a.tokens, a.authServer.Tokens())
	a.authServers = append(a.authServers, a.authServer.Issuer())
	a.Notices.On(cluster.Keys, a.authServer.Tokens().Forget)
	return nil
}

// probeHost finds what this host runs tools on (the sandbox, Chromium)
// and the embedder: Ollama when configured and answering, else the
// built-in one. host, when set, replaces what is detected.
func (a *App) probeHost(ctx context.Context, host *ops.HostCaps) (env hostEnv, err error) {
	cfg := a.Config
	if env.emb, env.embedNote, err = chooseEmbedder(ctx, cfg.OllamaURL, cfg.EmbedModel); err != nil {
		return env, err
	}
	if env.embedNote != "" {
		a.Log.Warn(env.embedNote)
	}
	if host == nil {
		env.host = ops.DetectHost()
	}
	// The data directory is the server's alone, but for the sandbox's
	// group when the server is root: commands run as uid 65534 must
	// traverse (never list) it to reach their work directories.
	if err := sandbox.ShareWithSandbox(cfg.DataDir); err != nil {
		return env, err
	}
	env.box = sandbox.Probe(ctx, cfg.Sandbox, filepath.Join(cfg.DataDir, "sessions"), a.Log)
	env.host.Sandbox = env.box.Available()
	if path, err := browser.Find(cfg.Chromium); err == nil {
		a.chromium = browser.New(path, a.Log)
		env.host.Chromium = true // also when TOOLBELT_CHROMIUM names one off PATH
	} else {
		env.host.Chromium = false
		a.Log.Warn("browser_navigate unavailable", "reason", err.Error())
	}
	if host != nil {
		env.host = *host
	}
	return env, nil
}

// buildCatalog makes the registry and the selector. Learned queries
// reach the other instances' rankings at once: the message names the
// tools, each instance reads their queries again.
func (a *App) buildCatalog(env hostEnv) {
	cfg := a.Config
	a.Registry = catalog.NewRegistry(a.Store, a.Log)
	a.Selector = selection.New(selection.Deps{Store: a.Store, Authz: a.Authz, Embedder: env.emb, Host: env.host,
		KeepLearned: cfg.KeepLearned, Metrics: a.Metrics, Log: a.Log,
		OnLearned: func(ctx context.Context, tools []string) {
			a.Notices.SendMessage(ctx, cluster.Learned, strings.Join(tools, ","))
		}})
}

// buildInvoke makes the invoke stage and what it runs on: the upstream
// servers, the runners, the callbacks, the invoker; the tool files (not
// yet applied), which may define upstream servers; and the alerts and the
// audit log over the calls it records. sleep, when set, replaces the wait between retries.
func (a *App) buildInvoke(env hostEnv, sleep func(context.Context, time.Duration) error) error {
	cfg := a.Config
	redactor, err := redact.New(secretValues(cfg))
	if err != nil {
		return fmt.Errorf("load secret detection rules: %w", err)
	}
	quota := runners.NewQuota(int64(cfg.SessionQuotaMB) << 20)
	// Stdio servers run in the sandbox, as tool commands do, or not at all.
	var stdio upstream.StdioStarter
	if env.box.Available() {
		stdio = &upstream.Sandboxed{Box: env.box, DataDir: cfg.DataDir, Limits: quota.Limits(), Net: cfg.NetPolicy, Log: a.Log}
	}
	// People's connections to OAuth upstreams, under the outbound policy.
	a.Connect = connect.New(connect.Deps{Store: a.Store, Vault: a.Vault, Net: cfg.NetPolicy, Secrets: cfg.Secrets,
		PublicURL: a.PublicURL, Exchange: cfg.canExchange(), Log: a.Log})
	a.Secrets = vault.NewSecrets(a.Store, a.Vault)
	a.Upstreams = upstream.New(upstream.Deps{Store: a.Store, Registry: a.Registry, Net: cfg.NetPolicy, Secrets: cfg.Secrets, Stdio: stdio,
		Caps: cfg.UpstreamProcesses, Auth: a.Connect, Credentials: a.credentials(), NotConnected: connect.ErrNotConnected,
		Personal: a.Secrets, PublicURL: a.PublicURL, Log: a.Log})
	a.Secrets.OnChange = a.Upstreams.SecretChanged
	a.Metrics.Register(a.Upstreams.Collector())
	if cfg.ToolsDir != "" {
		a.ToolFiles = catalog.NewToolFiles(cfg.ToolsDir, a.Registry, a.Upstreams, a.Log)
	}
	a.Runners = runners.NewTable(runners.Deps{DataDir: cfg.DataDir, Net: cfg.NetPolicy, Sandbox: env.box,
		Quota: quota, Browser: a.chromium, Search: cfg.SearXNG,
		Secrets: cfg.Secrets, PersonalSecrets: a.Secrets, PublicURL: a.PublicURL, Metrics: a.Metrics, MCP: a.Upstreams.Runner(), Log: a.Log})
	callbackKey, err := callbacks.LoadKey(cfg.CallbackKey, cfg.DataDir)
	if err != nil {
		return err
	}
	// Results go where http_request may go, checked the same way.
	a.Callbacks = callbacks.New(callbacks.Deps{Store: a.Store, Secrets: callbacks.NewSecrets(a.Store, callbackKey),
		Net: cfg.NetPolicy, Settings: cfg.Callbacks, Log: a.Log, Instance: cfg.Instance, Metrics: a.Metrics})
	a.Invoker = a.newInvoker(redactor, sleep)
	a.Alerts = ops.NewAlerts(ops.AlertsDeps{Store: a.Store, Config: cfg.Alerts, Metrics: a.Metrics, Log: a.Log})
	a.Audit = audit.New(a.Store, cfg.AuditRetention, a.Log)
	return nil
}

// newInvoker makes the invoker over the services built before it.
func (a *App) newInvoker(redactor *redact.Redactor, sleep func(context.Context, time.Duration) error) *invoke.Invoker {
	d := invoke.Deps{Store: a.Store, Selector: a.Selector, Authz: a.Authz, Redactor: redactor, Runners: a.Runners,
		DataDir: a.Config.DataDir, Log: a.Log, Metrics: a.Metrics, Callbacks: a.Callbacks, SharedResults: a.Redis,
		RateLimits: cluster.LimiterStore(a.Store, "limits"), Instance: a.Config.Instance, Sleep: sleep,
		MaxPendingApprovals: a.Config.Caps.PendingApprovals,
		QueueWaiting:        a.Config.QueueWaiting, QueueWaitingEach: a.Config.QueueWaitingEach}
	// Category limits hold in the cluster when instances share a queue:
	// in Redis when configured, falling back to the Postgres database
	// while it does not answer; else in the Postgres database.
	var shared *cluster.Queues
	switch {
	case a.Redis != nil && a.Store.Shared():
		shared = cluster.FailoverQueues(a.Redis, a.Store, a.Notices, a.Log)
	case a.Redis != nil:
		shared = cluster.RedisQueues(a.Redis, a.Notices, a.Log)
	case a.Store.Shared():
		shared = cluster.StoreQueues(a.Store, a.Notices, a.Log)
	}
	if shared != nil {
		if a.queueLease > 0 {
			shared.SetLease(a.queueLease)
		}
		d.SharedQueues = shared
	}
	// Background calls are claimed under this instance's name; the others
	// reach the calls it runs (cancel, stream) through the notices.
	if a.Notices != nil {
		d.Bus = a.Notices
	}
	return invoke.New(d)
}

// connect passes the change notices between the services, here and to
// the other instances; every service exists by now.
func (a *App) connect() {
	catalogChanged := func() {
		a.Selector.MarkDirty()
		a.Invoker.CatalogChanged()
	}
	a.Registry.OnChange(func(ctx context.Context) {
		catalogChanged()
		a.Notices.Send(ctx, cluster.Catalog)
	})
	a.Notices.On(cluster.Catalog, catalogChanged)
	a.Notices.On(cluster.Keys, a.Accounts.ForgetKeys)
	a.Notices.OnMessage(cluster.Learned, func(body string) { a.Selector.SyncLearnedLater(strings.Split(body, ",")) })
}

// prepare brings the database and the index to what this release serves:
// the admin key, the renderings, the built-in tools, the tool files, and
// the selection index over them.
func (a *App) prepare(ctx context.Context, env hostEnv) (err error) {
	if a.AdminKey, err = a.Accounts.Bootstrap(ctx, a.Config.AdminKey); err != nil {
		return err
	}
	// Renderings stored by an earlier revision of the renderer are made
	// again, before anything lists them.
	if _, err := a.Registry.RenderAgain(ctx); err != nil {
		return fmt.Errorf("render tools again: %w", err)
	}
	seeded, err := a.Registry.SeedBuiltins(ctx)
	if err != nil {
		return err
	}
	if len(seeded) > 0 {
		a.Log.Info("built-in tools seeded", "tools", seeded)
	}
	if a.ToolFiles != nil {
		// Instances starting at once apply the files one after the other:
		// the second finds them applied and changes nothing.
		if err := a.Store.Exclusive(ctx, "toolfiles", func() error { return a.ToolFiles.Load(ctx) }); err != nil {
			return err
		}
	}
	if err := a.Selector.Refresh(ctx); err != nil {
		return err
	}
	a.Log.Info("selection index ready", "embedder", a.Selector.Status(), "host", env.host)
	return nil
}

// buildHandler makes the HTTP handler of the whole service and its
// server.
func (a *App) buildHandler(env hostEnv) {
	cfg := a.Config
	health := a.health(env.box, env.embedNote)
	stats := ops.NewStats(ops.StatsDeps{Store: a.Store, Flush: a.Invoker.Flush})
	con := &console.Handler{Registry: a.Registry, Selector: a.Selector, Invoker: a.Invoker, Accounts: a.Accounts,
		Health: health, Stats: stats, Alerts: a.Alerts, Audit: a.Audit, Upstreams: a.Upstreams, OAuth: a.authServer, Secrets: a.Secrets, Log: a.Log,
		SSO: a.sso(), KeySignInOff: !cfg.KeySignIn, Connect: a.Connect}
	// Call event streams and MCP calls held open wait alike: one cap.
	waits := access.NewHolds("call event streams and held calls", cfg.Caps.EventStreams,
		func() { a.Metrics.CapRefused("event_streams") })
	h := &handlers.Handler{
		Registry: a.Registry, Selector: a.Selector, Accounts: a.Accounts,
		Invoker: a.Invoker, CallbackSecrets: a.Callbacks.Secrets(), Health: health, Log: a.Log, Connect: a.Connect,
		Links:   handlers.Links{Swagger: "/swagger/index.html", Healthz: "/healthz", Readyz: "/readyz"},
		Stats:   stats,
		Alerts:  a.Alerts,
		Audit:   a.Audit,
		Secrets: a.Secrets,
		// Documents fetched by URL follow the same SSRF policy as tool calls.
		OpenAPI:      catalog.NewOpenAPIImporter(a.Registry, cfg.NetPolicy, a.Log),
		Upstreams:    a.Upstreams,
		ErrorPage:    con.ErrorPage,
		EventStreams: waits,
	}
	a.mcp = mcpserver.New(mcpserver.Deps{Selector: a.Selector, Invoker: a.Invoker, Waits: waits, Version: Version, Log: a.Log})
	a.Handler = web.New(web.Deps{Handler: h, Console: con, Accounts: a.Accounts, Authz: a.Authz, Log: a.Log, RequestLine: a.requestLine, Metrics: a.Metrics, MCP: a.mcp,
		MCPSessions:    access.NewHolds("MCP sessions", cfg.Caps.MCPSessions, func() { a.Metrics.CapRefused("mcp_sessions") }),
		TrustedProxies: cfg.TrustedProxies, MCPAllowedOrigins: cfg.MCPAllowedOrigins,
		PublicURL: a.PublicURL, AuthorizationServers: a.authServers, Tokens: a.tokens,
		AuthServer: a.authServer, Connect: a.Connect})
	a.srv = newHTTPServer(cfg.Addr, a.Handler, serverTimeouts)
}

// listen listens on the configured address (Run serves it).
func (a *App) listen() (err error) {
	if a.ln, err = net.Listen("tcp", a.Config.Addr); err != nil {
		return fmt.Errorf("listen on %s: %w", a.Config.Addr, err)
	}
	a.URL = baseURL(a.ln.Addr().String())
	a.PublicURL = cmp.Or(a.Config.PublicURL, a.URL)
	return nil
}

// banner tells the person who started the server where it is, and the
// admin key this start created, once.
func (a *App) banner(stdout io.Writer) {
	if stdout == nil {
		stdout = os.Stdout
	}
	cfg := a.Config
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
	fmt.Fprintf(stdout, "\n  Home        %s/\n  Console     %s/admin\n  Swagger UI  %s/swagger/index.html\n  OpenAPI 3   %s/openapi.json\n  API         %s/api/v1\n  MCP         %s/mcp\n  Health      %s/healthz\n  Readiness   %s/readyz\n", b, b, b, b, b, b, b, b)
	// Where an MCP host with nothing but the URL finds its way in.
	if len(a.authServers) > 0 {
		fmt.Fprintf(stdout, "  OAuth       %s%s/mcp (sign-in: %s)\n", a.PublicURL, web.ResourceMetadataPath, strings.Join(a.authServers, ", "))
	}
	fmt.Fprintln(stdout)
	a.Log.Info("listening", "addr", a.ln.Addr().String(), "data_dir", cfg.DataDir)
}
