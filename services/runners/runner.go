// Package runners is the execute stage: it runs a call that passed the
// guard chain. Each runner kind (builtin, command, http) and each builtin
// tool is a Runner, found in one table by the definition's runner; the
// Table also holds what runners run on: the sandbox, Chromium, the egress
// policy and its HTTP client, the search endpoint, the configured secrets
// and the session work directories.
package runners

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"toolbelt/models"
	"toolbelt/services/browser"
	"toolbelt/services/netpolicy"
	"toolbelt/services/ops"
	"toolbelt/services/sandbox"
	"toolbelt/services/tooldef"
)

// Call is what a runner gets of a call: the tool's definition, the
// validated arguments and the session's work directory.
type Call struct {
	ID      string
	Def     tooldef.Definition
	Args    map[string]any
	Session string
	Dir     WorkDir
	Log     *slog.Logger
	// Emit streams the tool's progress to the call's event subscribers
	// (nil: nobody listens).
	Emit func(event string, data any)
	// OpenDir opens Dir again for a sandboxed command to be mounted from,
	// following no link and checked to be the directory made for the
	// session (set by Table.Run).
	OpenDir func() (*os.File, error)
	// Principal is the caller the call acts for: a tool that reaches an
	// upstream as a person (their connected account, their own secrets)
	// uses this principal's, never anyone else's.
	Principal *models.Principal
	// SubjectToken is the access token of the organisation's OpenID
	// provider that the caller authenticated with, for an upstream whose
	// token the provider mints from it (token exchange, RFC 8693). It is
	// in memory only, for this call: never recorded or logged, and empty
	// for a caller with an API key or an embedded server's token, and for
	// a call run in the background (async, approved, resumed elsewhere).
	SubjectToken string
	// ActedAs is set by a runner that acted as Principal's person at an
	// upstream, saying as whom (the call's record keeps it).
	ActedAs string
}

// Runner runs one kind of tool and returns the data of its result, or an
// error; an *Error is a failure the tool explains itself.
type Runner interface {
	Run(ctx context.Context, c *Call) (any, error)
}

// RunnerFunc makes a function a Runner.
type RunnerFunc func(ctx context.Context, c *Call) (any, error)

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, c *Call) (any, error) { return f(ctx, c) }

// Error is a failure a tool explains itself: its code from models'
// vocabulary and what the LLM should do about it.
type Error struct {
	Code       string
	Message    string
	Suggestion string
	Retryable  bool
	// RetryAfter, when set, makes the failure a refusal by a limit: the
	// wait in seconds it asks for (nothing ran).
	RetryAfter int
	// ConnectURL, on a failure for want of the person's own credentials
	// (models.CodeUpstreamNotConnected), is the console page where the
	// person connects them.
	ConnectURL string
}

// The console pages where a person connects their account at an upstream
// server or stores a secret of their own, under Toolbelt's public URL.
const (
	ConnectionsPage = "/admin/connections"
	SecretsPage     = "/admin/secrets"
)

// ConnectURL is the page under public where a person connects their
// account at the upstream server.
func ConnectURL(public, server string) string {
	return strings.TrimRight(public, "/") + ConnectionsPage + "?connect=" + url.QueryEscape(server)
}

// SecretURL is the page under public where a person stores their secret
// name.
func SecretURL(public, name string) string {
	return strings.TrimRight(public, "/") + SecretsPage + "?name=" + url.QueryEscape(name)
}

// NotConnected is the failure of a call that needs credentials of the
// person it acts for that they have not connected: what names them ("the
// upstream server github", "the secret GITHUB_TOKEN"), url is the console
// page that connects them. Nothing ran.
func NotConnected(what, url string) *Error {
	return &Error{Code: models.CodeUpstreamNotConnected, ConnectURL: url,
		Message:    fmt.Sprintf("%s needs the credentials of the person this call acts for, and they have not connected them: they connect them at %s", what, url),
		Suggestion: "Do not retry now: ask the person you act for to open " + url + " and connect, then try again."}
}

func (e *Error) Error() string { return e.Message }

// Table finds the runner of each definition and holds the mechanisms the
// runners share.
type Table struct {
	// builtins are the Go tools by name; kinds the other runner kinds.
	builtins map[string]Runner
	kinds    map[string]Runner

	dataDir      string // session work directories live under dataDir/sessions
	dirs         sync.Map
	quota        Quota
	sandbox      *sandbox.Sandbox
	browser      *browser.Browser
	net          netpolicy.Policy
	httpClient   *http.Client
	searchURL    string
	searchClient *http.Client
	secrets      map[string]string
	personal     PersonalSecrets
	publicURL    string
	metrics      *ops.Metrics
	log          *slog.Logger
}

// Deps is what the runners run on.
type Deps struct {
	// DataDir holds the session work directories, under sessions/.
	DataDir string
	// Net is where outbound requests may go.
	Net netpolicy.Policy
	// Sandbox is what tools with security.sandbox (and command runners)
	// run in; without one they refuse with SANDBOX_UNAVAILABLE, never
	// running unsandboxed.
	Sandbox *sandbox.Sandbox
	// Quota bounds the disk of every session's work directory
	// (DefaultSessionQuota when zero).
	Quota Quota
	// Browser is the Chromium browser_navigate drives (nil: none).
	Browser *browser.Browser
	// Search is the SearXNG-compatible endpoint web_search queries.
	Search string
	// Secrets are the values, by variable name, that http runners may
	// reference in headers as {{env.NAME}}: the configured secrets, read
	// once at start, whose values the redactor already removes from every
	// output.
	Secrets map[string]string
	// PersonalSecrets are the values people store for themselves, that
	// http runners fill into headers as {{user.secret.NAME}} for the
	// person a call acts for (nil: every such call answers
	// UPSTREAM_NOT_CONNECTED).
	PersonalSecrets PersonalSecrets
	// PublicURL is the server's origin as people reach it: where a call
	// missing a person's secret sends them (PublicURL/admin/secrets).
	PublicURL string
	// Metrics receive the limits that killed a sandboxed command (nil:
	// none).
	Metrics *ops.Metrics
	// MCP runs the tools of upstream MCP servers (nil: none here).
	MCP Runner
	Log *slog.Logger
}

// NewTable returns the table of every runner over d.
func NewTable(d Deps) *Table {
	t := &Table{
		dataDir: d.DataDir, quota: d.Quota, log: d.Log, sandbox: d.Sandbox, browser: d.Browser,
		searchURL: strings.TrimRight(d.Search, "/"), secrets: d.Secrets, metrics: d.Metrics,
		personal: d.PersonalSecrets, publicURL: strings.TrimRight(d.PublicURL, "/"),
		net: d.Net, httpClient: d.Net.Client(), searchClient: &http.Client{Timeout: 30 * time.Second},
	}
	if t.quota == (Quota{}) {
		t.quota = NewQuota(DefaultSessionQuota)
	}
	t.builtins = map[string]Runner{
		"file_read":        files(func(_ context.Context, c *Call) (any, error) { return fileRead(c) }),
		"file_write":       files(func(_ context.Context, c *Call) (any, error) { return fileWrite(c) }),
		"file_list":        files(fileList),
		"echo":             RunnerFunc(func(_ context.Context, c *Call) (any, error) { return c.Args, nil }),
		"http_request":     RunnerFunc(t.httpRequest),
		"shell_exec":       RunnerFunc(t.shellExec),
		"code_execute":     RunnerFunc(t.codeExecute),
		"web_search":       RunnerFunc(t.webSearch),
		"browser_navigate": RunnerFunc(t.browserNavigate),
	}
	t.kinds = map[string]Runner{
		tooldef.RunnerCommand: RunnerFunc(t.commandRunner),
		tooldef.RunnerHTTP:    RunnerFunc(t.httpRunner),
	}
	if d.MCP != nil {
		t.kinds[tooldef.RunnerMCP] = d.MCP
	}
	return t
}

// Run runs the call with its definition's runner. Whatever asked for the
// sandbox (and every command runner) never runs without one.
func (t *Table) Run(ctx context.Context, c *Call) (any, error) {
	if c.Def.Security.Sandbox || c.Def.Runner.Kind == tooldef.RunnerCommand {
		if err := t.sandboxMissing(c); err != nil {
			return nil, err
		}
	}
	c.OpenDir = func() (*os.File, error) { return t.openWorkDir(c) }
	r, ok := t.kinds[c.Def.Runner.Kind]
	if c.Def.Runner.Kind == tooldef.RunnerBuiltin {
		r, ok = t.builtins[c.Def.Runner.Builtin]
	}
	if !ok {
		return nil, &Error{Code: models.CodeExecutionFailed,
			Message:    fmt.Sprintf("runner %s %s cannot run on this server yet", c.Def.Runner.Kind, c.Def.Runner.Builtin),
			Suggestion: "Choose another tool; this one is not available here."}
	}
	return r.Run(ctx, c)
}

// files runs a file tool so that it ends with its call's context: a read
// from a slow file cannot hold the call's queue slot past its deadline.
func files(op RunnerFunc) Runner {
	return RunnerFunc(func(ctx context.Context, c *Call) (any, error) {
		return fileOp(ctx, func() (any, error) { return op(ctx, c) })
	})
}

// NetPolicy is where the runners' outbound requests may go.
func (t *Table) NetPolicy() netpolicy.Policy { return t.net }

// Sandbox is the sandbox in use (nil when none was set).
func (t *Table) Sandbox() *sandbox.Sandbox { return t.sandbox }
