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
	ID   string
	Def  tooldef.Definition
	Args map[string]any
	Dir  WorkDir
	Log  *slog.Logger
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
}

func (e *Error) Error() string { return e.Message }

// Table finds the runner of each definition and holds the mechanisms the
// runners share. Set its mechanisms before the first call.
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
	metrics      *ops.Metrics
	log          *slog.Logger
}

// New returns the table of every runner, with sessions under
// dataDir/sessions and outbound requests held to netPolicy.
func New(dataDir string, netPolicy netpolicy.Policy, log *slog.Logger) *Table {
	t := &Table{
		dataDir: dataDir, quota: NewQuota(DefaultSessionQuota), log: log,
		net: netPolicy, httpClient: netPolicy.Client(), searchClient: &http.Client{Timeout: 30 * time.Second},
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

// WithSandbox sets the sandbox that tools with security.sandbox (and
// command runners) run in; without one they refuse with
// SANDBOX_UNAVAILABLE, never running unsandboxed.
func (t *Table) WithSandbox(s *sandbox.Sandbox) *Table {
	t.sandbox = s
	return t
}

// NetPolicy is where the runners' outbound requests may go.
func (t *Table) NetPolicy() netpolicy.Policy { return t.net }

// Sandbox is the sandbox in use (nil when none was set).
func (t *Table) Sandbox() *sandbox.Sandbox { return t.sandbox }

// WithSessionQuota sets the disk quota of every session's work directory
// (DefaultSessionQuota otherwise).
func (t *Table) WithSessionQuota(q Quota) *Table {
	t.quota = q
	return t
}

// WithBrowser sets the Chromium that browser_navigate drives.
func (t *Table) WithBrowser(b *browser.Browser) *Table {
	t.browser = b
	return t
}

// WithSearch sets the SearXNG-compatible endpoint web_search queries.
func (t *Table) WithSearch(endpoint string) *Table {
	t.searchURL = strings.TrimRight(endpoint, "/")
	return t
}

// WithSecrets sets the values, by variable name, that http runners may
// reference in headers as {{env.NAME}}: the configured secrets, read once
// at start, whose values the redactor already removes from every output.
func (t *Table) WithSecrets(secrets map[string]string) *Table {
	t.secrets = secrets
	return t
}

// WithMetrics makes the sandboxed runners report the limits that killed
// a command to m.
func (t *Table) WithMetrics(m *ops.Metrics) *Table {
	t.metrics = m
	return t
}
