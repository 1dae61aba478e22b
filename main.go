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
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"toolbelt/handlers"
	"toolbelt/models"
	"toolbelt/services"
	"toolbelt/web"
)

// Config is every setting, read once at start from TOOLBELT_* variables
// with flags overriding them.
type Config struct {
	Addr      string
	DataDir   string
	AdminKey  string
	LogLevel  string
	LogFormat string
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
  serve   run the server (the default)
  help    show this help

Run "toolbelt serve -h" for the flags.`)
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func parseConfig(args []string) (Config, error) {
	cfg := Config{AdminKey: os.Getenv("TOOLBELT_ADMIN_KEY")}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&cfg.Addr, "addr", env("TOOLBELT_ADDR", ":8080"), "listen address (TOOLBELT_ADDR)")
	fs.StringVar(&cfg.DataDir, "data-dir", env("TOOLBELT_DATA_DIR", "./data"), "directory holding the SQLite database (TOOLBELT_DATA_DIR)")
	fs.StringVar(&cfg.LogLevel, "log-level", env("TOOLBELT_LOG_LEVEL", "info"), "debug, info, warn or error (TOOLBELT_LOG_LEVEL)")
	fs.StringVar(&cfg.LogFormat, "log-format", env("TOOLBELT_LOG_FORMAT", "json"), "json or text (TOOLBELT_LOG_FORMAT)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return cfg, nil
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

	authz, err := services.NewAuthz(ctx, store, web.RolePolicies())
	if err != nil {
		return err
	}
	accounts := services.NewAccounts(store, authz, log)
	registry := services.NewRegistry(store, log)
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

	h := &handlers.Handler{
		Registry: registry, Accounts: accounts, Health: services.NewHealth(store), Log: log,
		Links: handlers.Links{Swagger: "/swagger/index.html", Healthz: "/healthz", Readyz: "/readyz"},
	}
	srv := &http.Server{
		Addr:              cfg.Addr,
		Handler:           web.New(web.Deps{Handler: h, Accounts: accounts, Authz: authz, Log: log}),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	base := baseURL(ln.Addr().String())

	fmt.Printf("\nToolbelt is running on %s (data in %s)\n", base, cfg.DataDir)
	switch {
	case adminKey != "":
		fmt.Printf("\n  Admin API key (shown once, store it now):\n    %s\n", adminKey)
	case cfg.AdminKey != "":
		fmt.Printf("\n  Admin API key: the one in TOOLBELT_ADMIN_KEY\n")
	}
	fmt.Printf("\n  Home        %s/\n  Swagger UI  %s/swagger/index.html\n  API         %s/api/v1\n  Health      %s/healthz\n  Readiness   %s/readyz\n\n", base, base, base, base, base)
	log.Info("listening", "addr", ln.Addr().String(), "data_dir", cfg.DataDir)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	return nil
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
