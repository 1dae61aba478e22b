// Command toolbelt is the tools service for AI agents.
//
//	@title						Toolbelt API
//	@version					1.0
//	@description				Register tools once, select the few that fit a task, and run every call through validation, permissions, approvals and the sandbox. Authenticate with "Authorization: Bearer <api key>".
//	@BasePath					/api/v1
//	@securityDefinitions.apikey	BearerAuth
//	@in							header
//	@name						Authorization
//	@description				"Bearer " followed by an API key.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"toolbelt/handlers"
	"toolbelt/handlers/mcpserver"
	"toolbelt/models"
	"toolbelt/services"
	"toolbelt/services/access"
	"toolbelt/services/browser"
	"toolbelt/services/catalog"
	"toolbelt/services/embed"
	"toolbelt/services/netpolicy"
	"toolbelt/services/ops"
	"toolbelt/services/redact"
	"toolbelt/services/runners"
	"toolbelt/services/sandbox"
	"toolbelt/services/selection"
	"toolbelt/web"
)

// Config is every setting, read once at start from TOOLBELT_* variables
// with flags overriding them.
type Config struct {
	Addr        string
	DataDir     string
	AdminKey    string
	LogLevel    string
	LogFormat   string
	OllamaURL   string
	EmbedModel  string
	KeepLearned int
	Sandbox     string
	SearXNG     string
	// ShutdownTimeout is how long calls in flight may finish after
	// SIGTERM or SIGINT before they are cancelled as interrupted.
	ShutdownTimeout time.Duration
	// Alerts says when a tool's failure rate raises an alert.
	Alerts ops.AlertConfig
	// ToolsDir holds tool files (YAML or JSON), watched while serving.
	ToolsDir string
	// SessionQuotaMB is the disk quota of each session's work directory.
	SessionQuotaMB int
	// Chromium is the browser browser_navigate drives; empty: the first
	// found on PATH.
	Chromium string
	// Secrets are the values of the variables named in TOOLBELT_SECRETS,
	// by name.
	Secrets map[string]string
}

func main() {
	args := os.Args[1:]
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve(args)
	case "bench":
		err = bench(args)
	case "help":
		usage(os.Stdout)
	default:
		usage(os.Stderr)
		err = fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolbelt:", err)
		os.Exit(1)
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, `usage: toolbelt [serve] [flags]

Commands:
  serve             run the server (the default)
  bench retrieval   measure tool selection on labelled queries
  help              show this help

Run "toolbelt serve -h" or "toolbelt bench retrieval -h" for the flags.`)
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func parseConfig(args []string) (Config, error) {
	cfg := Config{AdminKey: os.Getenv("TOOLBELT_ADMIN_KEY"), Chromium: os.Getenv("TOOLBELT_CHROMIUM"), Secrets: secrets()}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&cfg.Addr, "addr", env("TOOLBELT_ADDR", ":8080"), "listen address (TOOLBELT_ADDR)")
	fs.StringVar(&cfg.DataDir, "data-dir", env("TOOLBELT_DATA_DIR", "./data"), "directory holding the SQLite database (TOOLBELT_DATA_DIR)")
	fs.StringVar(&cfg.LogLevel, "log-level", env("TOOLBELT_LOG_LEVEL", "info"), "debug, info, warn or error (TOOLBELT_LOG_LEVEL)")
	fs.StringVar(&cfg.LogFormat, "log-format", env("TOOLBELT_LOG_FORMAT", "json"), "json or text (TOOLBELT_LOG_FORMAT)")
	fs.StringVar(&cfg.OllamaURL, "ollama-url", os.Getenv("TOOLBELT_OLLAMA_URL"), "Ollama base URL for embeddings (TOOLBELT_OLLAMA_URL); the built-in embedder when empty or unreachable")
	fs.StringVar(&cfg.EmbedModel, "embed-model", env("TOOLBELT_EMBED_MODEL", "nomic-embed-text"), "Ollama embedding model (TOOLBELT_EMBED_MODEL)")
	fs.StringVar(&cfg.Sandbox, "sandbox", env("TOOLBELT_SANDBOX", sandbox.Auto), "auto, bubblewrap, native or none (TOOLBELT_SANDBOX): how commands of tools are isolated")
	fs.StringVar(&cfg.ToolsDir, "tools-dir", env("TOOLBELT_TOOLS_DIR", "./tools.d"), "directory of tool files (YAML or JSON), applied at start and watched (TOOLBELT_TOOLS_DIR); empty: none")
	fs.StringVar(&cfg.SearXNG, "searxng-url", os.Getenv("TOOLBELT_SEARXNG_URL"), "SearXNG-compatible search endpoint for web_search (TOOLBELT_SEARXNG_URL)")
	keep, err := strconv.Atoi(env("TOOLBELT_LEARNED_PER_TOOL", strconv.Itoa(selection.DefaultKeepLearned)))
	if err != nil || keep < 1 {
		return cfg, fmt.Errorf("TOOLBELT_LEARNED_PER_TOOL must be a positive integer")
	}
	fs.IntVar(&cfg.KeepLearned, "learned-per-tool", keep, "learned queries kept per tool, oldest dropped (TOOLBELT_LEARNED_PER_TOOL)")
	grace, err := time.ParseDuration(env("TOOLBELT_SHUTDOWN_TIMEOUT", "20s"))
	if err != nil || grace < 0 {
		return cfg, fmt.Errorf("TOOLBELT_SHUTDOWN_TIMEOUT must be a duration such as 20s")
	}
	quota, err := strconv.Atoi(env("TOOLBELT_SESSION_QUOTA_MB", strconv.Itoa(runners.DefaultSessionQuota>>20)))
	if err != nil || quota < 1 {
		return cfg, fmt.Errorf("TOOLBELT_SESSION_QUOTA_MB must be a positive number of MiB")
	}
	fs.IntVar(&cfg.SessionQuotaMB, "session-quota-mb", quota, "disk quota of each session's work directory, in MiB (TOOLBELT_SESSION_QUOTA_MB)")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", grace, "how long calls in flight may finish on SIGTERM before they are interrupted (TOOLBELT_SHUTDOWN_TIMEOUT)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if cfg.KeepLearned < 1 {
		return cfg, fmt.Errorf("--learned-per-tool must be at least 1")
	}
	if cfg.SessionQuotaMB < 1 {
		return cfg, fmt.Errorf("--session-quota-mb must be at least 1")
	}
	if !slices.Contains([]string{sandbox.Auto, sandbox.Bubblewrap, sandbox.Native, sandbox.None}, cfg.Sandbox) {
		return cfg, fmt.Errorf("--sandbox %q: use auto, bubblewrap, native or none", cfg.Sandbox)
	}
	if cfg.SearXNG != "" {
		if u, err := url.Parse(cfg.SearXNG); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return cfg, fmt.Errorf("--searxng-url %q: use an absolute http or https URL", cfg.SearXNG)
		}
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if cfg.Alerts, err = alertConfig(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// alertConfig reads the failure-rate alert settings from the environment.
func alertConfig() (ops.AlertConfig, error) {
	a := ops.DefaultAlertConfig
	if v := env("TOOLBELT_ALERT_FAILURE_RATE", ""); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 1 {
			return a, fmt.Errorf("TOOLBELT_ALERT_FAILURE_RATE %q: use a share between 0 and 1, such as 0.5", v)
		}
		a.Threshold = f
	}
	if v := env("TOOLBELT_ALERT_WINDOW", ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute {
			return a, fmt.Errorf("TOOLBELT_ALERT_WINDOW %q: use a duration of at least 1m, such as 15m", v)
		}
		a.Window = d
	}
	if v := env("TOOLBELT_ALERT_MIN_CALLS", ""); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return a, fmt.Errorf("TOOLBELT_ALERT_MIN_CALLS %q: use a whole number of at least 1", v)
		}
		a.MinCalls = n
	}
	if v := env("TOOLBELT_ALERT_WEBHOOK", ""); v != "" {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return a, fmt.Errorf("TOOLBELT_ALERT_WEBHOOK: use an absolute http or https URL")
		}
		a.Webhook = v
	}
	return a, nil
}

func newLogger(cfg Config) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", cfg.LogLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch cfg.LogFormat {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: use json or text", cfg.LogFormat)
}

func serve(args []string) error {
	cfg, err := parseConfig(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log, err := newLogger(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	store, err := models.Open(ctx, filepath.Join(cfg.DataDir, "toolbelt.db"))
	if err != nil {
		return err
	}
	defer store.Close()

	authz, err := access.NewAuthz(ctx, store, web.RolePolicies())
	if err != nil {
		return err
	}
	accounts := access.NewAccounts(store, authz, log)
	registry := catalog.NewRegistry(store, log)
	emb, embedNote, err := chooseEmbedder(ctx, cfg.OllamaURL, cfg.EmbedModel)
	if err != nil {
		return err
	}
	if embedNote != "" {
		log.Warn(embedNote)
	}
	redactor, err := redact.New(secretValues(cfg))
	if err != nil {
		return fmt.Errorf("load secret detection rules: %w", err)
	}
	host := ops.DetectHost()
	// The data directory is the server's alone, but for the sandbox's
	// group when the server is root: commands run as uid 65534 must
	// traverse (never list) it to reach their work directories.
	if err := sandbox.ShareWithSandbox(cfg.DataDir); err != nil {
		return err
	}
	box := sandbox.Probe(ctx, cfg.Sandbox, filepath.Join(cfg.DataDir, "sessions"), log)
	host.Sandbox = box.Available()
	var chromium *browser.Browser
	if path, err := browser.Find(cfg.Chromium); err == nil {
		chromium = browser.New(path, log)
		host.Chromium = true // also when TOOLBELT_CHROMIUM names one off PATH
		defer chromium.Close()
	} else {
		host.Chromium = false
		log.Warn("browser_navigate unavailable", "reason", err.Error())
	}
	metrics := ops.NewMetrics()
	selector := selection.NewSelector(store, authz, emb, host, cfg.KeepLearned, log).WithMetrics(metrics)
	defer selector.Close()
	var invoker *services.Invoker
	registry.OnChange(func(context.Context) {
		selector.MarkDirty()
		if invoker != nil {
			invoker.CatalogChanged()
		}
	})
	adminKey, err := accounts.Bootstrap(ctx, cfg.AdminKey)
	if err != nil {
		return err
	}
	seeded, err := registry.SeedBuiltins(ctx)
	if err != nil {
		return err
	}
	if len(seeded) > 0 {
		log.Info("built-in tools seeded", "tools", seeded)
	}
	var toolFiles *catalog.ToolFiles
	if cfg.ToolsDir != "" {
		toolFiles = catalog.NewToolFiles(cfg.ToolsDir, registry, log)
		if err := toolFiles.Load(ctx); err != nil {
			return err
		}
	}
	if err := selector.Refresh(ctx); err != nil {
		return err
	}
	log.Info("selection index ready", "embedder", selector.Status(), "host", host)

	netPolicy, err := netpolicy.Parse(os.Getenv("TOOLBELT_HTTP_ALLOW_HOSTS"), os.Getenv("TOOLBELT_HTTP_ALLOW_PRIVATE"))
	if err != nil {
		return fmt.Errorf("TOOLBELT_HTTP_ALLOW_PRIVATE: %w", err)
	}
	invoker = services.NewInvoker(store, selector, authz, redactor, netPolicy, cfg.DataDir, nil, log).
		WithSandbox(box).WithSessionQuota(runners.NewQuota(int64(cfg.SessionQuotaMB) << 20)).WithBrowser(chromium).WithSearch(cfg.SearXNG).WithSecrets(cfg.Secrets).WithMetrics(metrics)
	invoker.ReportPendingApprovals(metrics)
	h := &handlers.Handler{
		Registry: registry, Selector: selector, Accounts: accounts,
		Invoker: invoker, Health: ops.NewHealth(store, selector, embedNote).WithSandbox(box.Status()).WithToolFiles(toolFiles), Log: log,
		Links:  handlers.Links{Swagger: "/swagger/index.html", Healthz: "/healthz", Readyz: "/readyz"},
		Stats:  ops.NewStats(store, invoker.Flush),
		Alerts: ops.NewAlerts(store, cfg.Alerts, metrics, log),
		// Documents fetched by URL follow the same SSRF policy as tool calls.
		OpenAPI: catalog.NewOpenAPIImporter(registry, netPolicy, log),
	}
	mcpServer := mcpserver.New(selector, invoker, version, log)
	srv := newHTTPServer(cfg.Addr, web.New(web.Deps{Handler: h, Accounts: accounts, Authz: authz, Log: log, Metrics: metrics, MCP: mcpServer}), serverTimeouts)
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	base := baseURL(ln.Addr().String())
	if err := invoker.Recover(ctx); err != nil {
		return fmt.Errorf("recover calls: %w", err)
	}
	go invoker.SweepApprovals(ctx, 30*time.Second)
	go h.Alerts.Run(ctx)
	if toolFiles != nil {
		go func() {
			if err := toolFiles.Watch(ctx); err != nil {
				log.Warn("tool files are not watched", "dir", cfg.ToolsDir, "err", err)
			}
		}()
	}
	go func() { // expired console sessions: now, then hourly (lookups ignore them meanwhile)
		t := time.NewTicker(time.Hour)
		defer t.Stop()
		for {
			if err := accounts.PruneConsoleSessions(ctx); err != nil {
				log.Warn("prune console sessions", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()

	fmt.Printf("\nToolbelt is running on %s (data in %s)\n", base, cfg.DataDir)
	switch {
	case adminKey != "":
		fmt.Printf("\n  Admin API key (shown once, store it now):\n    %s\n", adminKey)
	case cfg.AdminKey != "":
		fmt.Printf("\n  Admin API key: the one in TOOLBELT_ADMIN_KEY\n")
	}
	fmt.Printf("\n  Home        %s/\n  Console     %s/admin\n  Swagger UI  %s/swagger/index.html\n  API         %s/api/v1\n  Health      %s/healthz\n  Readiness   %s/readyz\n\n", base, base, base, base, base, base)
	log.Info("listening", "addr", ln.Addr().String(), "data_dir", cfg.DataDir)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Stop accepting at once; let calls in flight finish until the
	// deadline, then cancel them (recorded as interrupted) and let their
	// answers go out before the connections close.
	log.Info("shutting down", "deadline", cfg.ShutdownTimeout.String())
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	serverDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout+15*time.Second)
		defer cancel()
		serverDone <- srv.Shutdown(ctx)
	}()
	invoker.Shutdown(shutdownCtx)
	// The calls are answered; MCP event streams would otherwise hold the
	// shutdown until its deadline.
	mcpServer.Close()
	if err := <-serverDone; err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	log.Info("stopped")
	return nil
}

// version is the server version MCP clients are told; it follows the
// OpenAPI document's.
const version = "1.0"

// timeouts bound what a slow or idle client can hold: headers must arrive
// within Header, the whole request within Read, and a kept-alive
// connection is closed after Idle. There is no write timeout: a call may
// run up to its tool's timeout, and event streams stay open.
type timeouts struct{ Header, Read, Idle time.Duration }

var serverTimeouts = timeouts{Header: 10 * time.Second, Read: 60 * time.Second, Idle: 120 * time.Second}

// newHTTPServer is the server with its limits for slow clients and large
// headers (bodies are capped by the web layer).
func newHTTPServer(addr string, h http.Handler, t timeouts) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: t.Header,
		ReadTimeout:       t.Read,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    64 << 10,
	}
}

// baseURL turns a listen address into the URL a person on this machine
// would open.
func baseURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// bench runs a benchmark: "bench retrieval --tools F --queries F
// [--history F] [--json]".
func bench(args []string) error {
	if len(args) == 0 || args[0] != "retrieval" {
		return fmt.Errorf("usage: toolbelt bench retrieval --tools FILE --queries FILE [--history FILE] [--json]")
	}
	fs := flag.NewFlagSet("bench retrieval", flag.ContinueOnError)
	tools := fs.String("tools", "", "JSON lines of {name, description, category?, parameters?}")
	queries := fs.String("queries", "", "JSON lines of {query, gold: [names]} to measure")
	history := fs.String("history", "", "JSON lines of {query, gold} replayed as past usage first")
	asJSON := fs.Bool("json", false, "print one JSON object")
	ollamaURL := fs.String("ollama-url", os.Getenv("TOOLBELT_OLLAMA_URL"), "Ollama base URL (TOOLBELT_OLLAMA_URL); the built-in embedder when empty")
	model := fs.String("embed-model", env("TOOLBELT_EMBED_MODEL", "nomic-embed-text"), "Ollama embedding model (TOOLBELT_EMBED_MODEL)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *tools == "" || *queries == "" {
		return fmt.Errorf("bench retrieval needs --tools and --queries")
	}
	ctx := context.Background()
	emb, note, err := chooseEmbedder(ctx, *ollamaURL, *model)
	if err != nil {
		return err
	}
	rep, err := selection.RunRetrievalBench(ctx, selection.BenchOptions{Tools: *tools, Queries: *queries, History: *history, Embedder: emb})
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(rep)
	}
	if note != "" {
		fmt.Println(note)
	}
	fmt.Printf("embedder   %s\ntools      %d registered", rep.Embedder, rep.Tools)
	if len(rep.Unregister) > 0 {
		fmt.Printf(", %d refused:\n  %s", len(rep.Unregister), strings.Join(rep.Unregister, "\n  "))
	}
	fmt.Printf("\nreplayed   %d history queries\nqueries    %d\nRecall@5   %.2f\nRecall@10  %.2f\nRecall@15  %.2f\nNDCG@10    %.2f\nlatency    p50 %.3f ms, p99 %.3f ms\n",
		rep.Replayed, rep.Queries, rep.Recall5, rep.Recall10, rep.Recall15, rep.NDCG10, rep.P50Ms, rep.P99Ms)
	return nil
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

// secretValues are the values redacted verbatim from tool output and call
// records: the admin key and the configured secrets.
func secretValues(cfg Config) []string {
	vals := []string{cfg.AdminKey}
	for _, name := range slices.Sorted(maps.Keys(cfg.Secrets)) {
		vals = append(vals, cfg.Secrets[name])
	}
	return vals
}

// secrets reads the variables named in TOOLBELT_SECRETS (comma-separated
// names, e.g. the variables http tools take headers from): http tools may
// reference them in headers as {{env.NAME}}.
func secrets() map[string]string {
	vals := map[string]string{}
	for _, name := range strings.Split(os.Getenv("TOOLBELT_SECRETS"), ",") {
		if name = strings.TrimSpace(name); name != "" {
			vals[name] = os.Getenv(name)
		}
	}
	return vals
}
