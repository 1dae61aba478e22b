package runners

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"toolbelt/models"
	"toolbelt/services/sandbox"
	"toolbelt/services/tooldef"
)

// sandboxed runs argv in the call's work directory and turns the outcome
// into the data of a result: exit code, stdout and stderr. A limit hit is
// SANDBOX_LIMIT naming it. env is added to the sandbox's environment.
func (t *Table) sandboxed(ctx context.Context, c *Call, argv []string, stdin []byte, env ...string) (any, error) {
	if err := t.sandboxMissing(c); err != nil {
		return nil, err
	}
	// The command's only writable place is the session's directory,
	// mounted from a descriptor opened without following a link.
	dir, err := t.openWorkDir(c)
	if err != nil {
		t.log.ErrorContext(ctx, "open work directory", "err", err, "call_id", c.ID)
		if disk := models.FullDisk(err); disk != "" {
			return nil, &Error{Code: models.CodeStorageFull, Message: disk + " is full: the session's work directory cannot be opened",
				Retryable: true, Suggestion: "Try again later: the server's administrator must free space first."}
		}
		return nil, &Error{Code: models.CodeInternal, Message: "internal error", Retryable: true, Suggestion: "Try again."}
	}
	defer dir.Close()
	defer c.Dir.usage.stale() // the command may have changed anything in it
	spec := sandbox.Spec{Argv: argv, Dir: c.Dir.Path, DirFD: dir, Stdin: stdin, Network: c.Def.Security.Network,
		Limits: t.quota.Limits()}
	if len(env) > 0 {
		spec.Env = append(sandbox.DefaultEnv(t.sandbox.WorkPath(spec)), env...)
	}
	res, err := t.sandbox.Run(ctx, spec)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("the sandbox could not run the command: %w", err)
	}
	c.Log.InfoContext(ctx, "sandboxed command ended", "exit_code", res.ExitCode, "limit", string(res.Limit), "ms", res.Duration.Milliseconds())
	out := map[string]any{"exit_code": res.ExitCode, "stdout": string(res.Stdout), "stderr": string(res.Stderr)}
	if res.Limit == "" {
		return out, nil
	}
	// A limit that ended the command is a failure the LLM can act on. Time
	// is TIMEOUT, whichever deadline passed: the tool's own is reported by
	// the invoker (it checks its context first), a shorter one the call
	// asked for (timeout_seconds) here, with the same code.
	if res.Limit == sandbox.LimitTime {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, ctx.Err()
		}
		t.metrics.SandboxKill(string(res.Limit))
		return nil, &Error{Code: models.CodeTimeout, // not retried: see invoke's attempt
			Message:    fmt.Sprintf("the command did not finish within its timeout_seconds and was killed after %d ms", res.Duration.Milliseconds()),
			Suggestion: "Do less work per call, split the task, or ask for a longer timeout_seconds."}
	}
	advice := map[sandbox.Limit]string{
		sandbox.LimitMemory:    "Use less memory: process the data in smaller pieces.",
		sandbox.LimitProcesses: "Start fewer processes or threads.",
		sandbox.LimitOutput:    "Print less: write large output to a file in the work directory and read parts of it with file_read.",
		sandbox.LimitDisk:      "Delete files you no longer need from the work directory, or write less: the session's disk quota is full.",
		sandbox.LimitFileSize:  "Write smaller files: one file may not pass the sandbox's file size limit.",
	}
	t.metrics.SandboxKill(string(res.Limit))
	msg := fmt.Sprintf("the command hit the sandbox's %s limit (exit code %d)", res.Limit, res.ExitCode)
	if t := tail(res.Stderr, 500); t != "" {
		msg += ": " + t
	}
	return nil, &Error{Code: models.CodeSandboxLimit, Message: msg, Suggestion: advice[res.Limit]}
}

// sandboxMissing is SANDBOX_UNAVAILABLE when there is no sandbox to run
// c's command in, nil otherwise.
func (t *Table) sandboxMissing(c *Call) error {
	if t.sandbox.Available() {
		return nil
	}
	reason := "no sandbox is configured"
	if t.sandbox != nil {
		reason = t.sandbox.Status().Reason
	}
	return &Error{Code: models.CodeSandboxUnavailable,
		Message:    fmt.Sprintf("%s needs the sandbox, which is not available on this server (%s)", c.Def.Name, reason),
		Suggestion: "Do not retry; choose a tool that needs no sandbox, or ask an administrator to install bubblewrap."}
}

// tail is the end of a command's stderr, for an error message.
func tail(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// shellExec runs one command line with sh in the sandbox; the secure guard
// has already refused chaining, pipes, substitution and redirection unless
// the tool allows them.
func (t *Table) shellExec(ctx context.Context, c *Call) (any, error) {
	cmd, _ := c.Args["command"].(string)
	if secs := intArg(c.Args, "timeout_seconds", 0); secs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(secs)*time.Second)
		defer cancel()
	}
	return t.sandboxed(ctx, c, []string{"sh", "-c", cmd}, nil)
}

// codeExecute runs a Python or JavaScript program in the sandbox.
func (t *Table) codeExecute(ctx context.Context, c *Call) (any, error) {
	code, _ := c.Args["code"].(string)
	stdin, _ := c.Args["stdin"].(string)
	var argv []string
	switch c.Args["language"] {
	case "python":
		argv = []string{"python3", "-I", "-c", code}
	case "javascript":
		argv = []string{"node", "-e", code}
	default:
		return nil, &Error{Code: models.CodeValidation, Message: fmt.Sprintf("language %v is not supported", c.Args["language"]), Suggestion: "Use python or javascript."}
	}
	return t.sandboxed(ctx, c, argv, []byte(stdin))
}

// commandRunner runs a registered command tool: each argv element that is
// a {{placeholder}} becomes exactly one argument, the argument's value
// (never split or interpreted by a shell); an element whose optional
// argument is absent is left out, and a value the program would read as
// an option is refused (tooldef.FillArgv). A template that runs the
// caller's code undeclared (stored before registration refused it) does
// not run. The command runs with the switches that keep its programs
// from running the work directory's settings (tooldef.WorkDirEnv): the
// caller can write them.
func (t *Table) commandRunner(ctx context.Context, c *Call) (any, error) {
	if p := tooldef.UndeclaredCode(c.Def); p != "" {
		return nil, &Error{Code: models.CodeCommandRejected,
			Message:    fmt.Sprintf("%s was registered before Toolbelt refused its template, which runs the caller's code: %s", c.Def.Name, p),
			Suggestion: "Do not retry; choose another tool, or ask an administrator to register this one again."}
	}
	argv, err := tooldef.FillArgv(c.Def, c.Args)
	if err != nil {
		var ae *tooldef.ArgvError
		if errors.As(err, &ae) {
			return nil, &Error{Code: models.CodeValidation, Message: ae.Message, Suggestion: ae.Suggestion}
		}
		return nil, err
	}
	return t.sandboxed(ctx, c, argv, nil, tooldef.WorkDirEnv()...)
}
