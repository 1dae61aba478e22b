// Command toolbelt is the tools service for AI agents.
//
//	@title						Toolbelt API
//	@version					1.0
//	@description				Register tools once, select the few that fit a task, and run every call through validation, permissions, approvals and the sandbox. Authenticate with "Authorization: Bearer <api key>". The same API as OpenAPI 3.0, for client generators: [/openapi.json](/openapi.json).
//	@BasePath					/
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
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"toolbelt/app"
)

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
	case "vault":
		err = vaultCmd(args)
	case "version":
		fmt.Println(version())
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
  bench select      time selection over a synthetic catalog of N tools
  vault rotate      seal every stored token and secret anew under the first
                    key of TOOLBELT_VAULT_KEY="new,old" (see docs/identity-vault.md)
  version           print the build's version, commit and Go release
  help              show this help

Run "toolbelt serve -h", "toolbelt bench retrieval -h" or "toolbelt bench select -h" for the flags.`)
}

// version describes the build from what the Go toolchain stamped in it:
// the module version, the commit (with "+dirty" when the tree had
// changes) and its time, and the Go release.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "toolbelt (no build information)"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	out := "toolbelt " + info.Main.Version
	if rev := settings["vcs.revision"]; rev != "" {
		if settings["vcs.modified"] == "true" {
			rev += "+dirty"
		}
		out += " commit " + rev
		if at := settings["vcs.time"]; at != "" {
			out += " (" + at + ")"
		}
	}
	return out + " " + info.GoVersion
}

// serve runs the server until SIGTERM or SIGINT.
func serve(args []string) error {
	cfg, err := app.ParseConfig(args, os.LookupEnv)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := app.New(ctx, cfg, app.Options{})
	if err != nil {
		return err
	}
	// Libraries that log only to the default logger (zitadel/oidc's
	// authorization server) write the server's JSON lines too.
	slog.SetDefault(a.Log)
	return a.Run(ctx)
}

// vaultCmd runs "vault rotate [flags]": the serve flags and settings
// name the database and the keys.
func vaultCmd(args []string) error {
	if len(args) == 0 || args[0] != "rotate" {
		return fmt.Errorf("usage: TOOLBELT_VAULT_KEY=new,old toolbelt vault rotate [--data-dir DIR]")
	}
	cfg, err := app.ParseConfig(args[1:], os.LookupEnv)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return app.RotateVault(ctx, cfg, os.Stdout)
}

// bench runs a benchmark: "bench retrieval --tools F --queries F
// [--history F] [--json]" or "bench select [--tools N] [--queries N]
// [--json]".
func bench(args []string) error {
	if len(args) > 0 && args[0] == "select" {
		cfg, err := app.ParseSelectBenchConfig(args[1:])
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		if err != nil {
			return err
		}
		return app.BenchSelect(context.Background(), cfg, os.Stdout)
	}
	if len(args) == 0 || args[0] != "retrieval" {
		return fmt.Errorf("usage: toolbelt bench retrieval --tools FILE --queries FILE [--history FILE] [--json]\n       toolbelt bench select [--tools N] [--queries N] [--json]")
	}
	cfg, err := app.ParseBenchConfig(args[1:], os.LookupEnv)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	return app.Bench(context.Background(), cfg, os.Stdout)
}
