// Package tooldef is the language of tool definitions: what an admin
// registers (name, parameters schema, security, execution, runner), the
// defaults a definition may omit, and the validation every one passes.
package tooldef

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"toolbelt/models"
)

// Categories lists the tool categories Toolbelt indexes, in display order.
var Categories = []string{"filesystem", "browser", "shell", "search", "code", "api"}

// Security levels, from least to most guarded.
const (
	LevelSafe      = "safe"
	LevelModerate  = "moderate"
	LevelDangerous = "dangerous"
)

// Levels lists the security levels in ascending order of risk.
var Levels = []string{LevelSafe, LevelModerate, LevelDangerous}

// Runner kinds say how a registered tool actually runs.
const (
	RunnerBuiltin   = "builtin"
	RunnerCommand   = "command"
	RunnerHTTP      = "http"
	RunnerComposite = "composite"
	// RunnerMCP sends the call to a tool of an upstream MCP server that
	// Toolbelt connects to (services/upstream).
	RunnerMCP = "mcp"
)

// Definition is the JSON an admin or a tool file registers. It is stored
// verbatim (after defaults are filled) as one immutable version.
type Definition struct {
	Name        string          `json:"name" example:"file_read"`
	Version     string          `json:"version" example:"1.0.0"`
	Description string          `json:"description" example:"Read a UTF-8 text file from the session's work directory."`
	Category    string          `json:"category" example:"filesystem" enums:"filesystem,browser,shell,search,code,api"`
	Tags        []string        `json:"tags,omitempty"`
	Examples    []string        `json:"examples,omitempty"`
	Parameters  json.RawMessage `json:"parameters" swaggertype:"object"`
	Security    Security        `json:"security"`
	Execution   Execution       `json:"execution"`
	Runner      Runner          `json:"runner"`
}

// Security holds the guards a call of the tool must pass.
type Security struct {
	Level          string   `json:"level" example:"safe" enums:"safe,moderate,dangerous"`
	RequireConfirm bool     `json:"requireConfirm"`
	Sandbox        bool     `json:"sandbox"`
	AllowedPaths   []string `json:"allowedPaths,omitempty"`
	Network        bool     `json:"network"`
	// ShellOperators lets a shell tool's command chain, pipe, redirect and
	// substitute; by default only one plain command is accepted.
	ShellOperators bool       `json:"shellOperators,omitempty"`
	RateLimit      *RateLimit `json:"rateLimit,omitempty"`
}

// RateLimit caps calls per principal within a sliding window.
type RateLimit struct {
	MaxCalls int `json:"maxCalls" example:"60"`
	WindowMs int `json:"windowMs" example:"60000"`
}

// Execution holds timeout, retry and cache settings for a call.
type Execution struct {
	Timeout    int  `json:"timeout" example:"10000"`
	Retryable  bool `json:"retryable"`
	MaxRetries int  `json:"maxRetries"`
	// RetryTimeouts retries an attempt that ran past its timeout too
	// (within maxRetries). Off by default: a tool that hung once most
	// likely hangs again, holding its queue slot a whole timeout each
	// time; a tool whose timeouts are known to pass (a flaky network
	// hop) says so here.
	RetryTimeouts bool `json:"retryTimeouts,omitempty"`
	// Cacheable answers a call from an earlier success with the same
	// version and arguments, made by the same principal in the same
	// session. Only an http tool free of per-caller state (CallerFree:
	// URL and body from the arguments, headers from the arguments and
	// {{env.NAME}}) shares its results with every caller.
	Cacheable bool `json:"cacheable"`
	CacheTTL  int  `json:"cacheTTL"`
}

// Runner says how the tool runs; which fields apply depends on Kind.
type Runner struct {
	Kind    string            `json:"kind" example:"builtin" enums:"builtin,command,http,composite,mcp"`
	Builtin string            `json:"builtin,omitempty" example:"file_read"`
	Argv    []string          `json:"argv,omitempty"`
	Method  string            `json:"method,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
	Steps   []CompositeStep   `json:"steps,omitempty"`
	// Server and Tool name, for an mcp runner, the upstream MCP server
	// and its tool's own name there.
	Server string `json:"server,omitempty" example:"everything"`
	Tool   string `json:"tool,omitempty" example:"get-sum"`
	// RunsArgumentAsCode says a command tool runs the caller's code on
	// purpose: a placeholder in the script position of a shell or
	// interpreter (sh -c {{script}}) or handed to a fixed script of one
	// (sh -c '…' sh {{x}}), or a program that runs what the work
	// directory holds (make, npm, pytest, git, ./build.sh). Such a tool
	// may not be safe.
	RunsArgumentAsCode bool `json:"runsArgumentAsCode,omitempty"`
	// OptionArguments names the parameters of a command tool whose values
	// may be options of the program (start with "-"); any other value
	// that would be read as an option is refused when the call is made.
	OptionArguments []string `json:"optionArguments,omitempty"`
}

// CompositeStep is one call a composite tool makes; its arguments may refer
// to the composite's input and earlier steps' outputs.
type CompositeStep struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty" swaggertype:"object"`
}

// Builtins lists the Go implementations shipped with Toolbelt that a builtin
// runner may name.
var Builtins = []string{
	"shell_exec", "file_read", "file_write", "file_list", "code_execute",
	"http_request", "web_search", "browser_navigate",
	// echo answers its arguments: a no-op for testing integrations and for
	// measuring the guard chain.
	"echo",
}

// Decode reads a definition as the catalog stores it.
func Decode(raw string) (Definition, error) {
	var def Definition
	if err := json.Unmarshal([]byte(raw), &def); err != nil {
		return def, fmt.Errorf("decode stored definition: %w", err)
	}
	return def, nil
}

// CheckName refuses names that cannot be tools before they reach a query,
// so a path character or a look-alike letter gets a precise answer.
func CheckName(name string) error {
	if !NamePattern.MatchString(name) {
		return models.ErrInvalid.Errorf("%q is not a tool name (snake_case ASCII, at most 64 characters)", name)
	}
	return nil
}

// Dedupe trims names and drops repeats, keeping the first of each.
func Dedupe(xs []string) []string {
	out := []string{}
	for _, x := range xs {
		x = strings.TrimSpace(x)
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
