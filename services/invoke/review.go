package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"toolbelt/models"
	"toolbelt/services/tooldef"
)

// Review is what a reviewer reads about a pending call besides its
// arguments: what the tool is and why it needs approval, where the agent
// was in its work, and what the security checks read in the arguments.
type Review struct {
	// Level is the tool's security level; Why says why the call waits
	// for a reviewer (its level, its requireConfirm, or a step of it).
	Level, Why  string
	Description string
	SessionID   string
	// Task is the request of the session's last selection before the
	// call: what the agent was working on ("" when it selected nothing).
	Task string
	// Findings are what the checks read in the arguments, one an
	// argument they look at.
	Findings []Finding
	// Refusal is what the checks will answer the call once approved,
	// when they refuse it: approving it would run nothing.
	Refusal *ToolError
}

// Finding is what the security checks read in one argument.
type Finding struct {
	Argument, What string
}

// ReviewOf gathers a's Review.
func (inv *Invoker) ReviewOf(ctx context.Context, a *models.Approval) (*Review, error) {
	rec, err := inv.recording.calls.byID(ctx, a.CallID)
	if err != nil {
		return nil, err
	}
	var req CallRequest
	if err := json.Unmarshal([]byte(rec.Request), &req); err != nil {
		return nil, fmt.Errorf("decode request of call %s: %w", a.CallID, err)
	}
	rt, err := inv.version(ctx, a.Tool, a.Version)
	if err != nil {
		return nil, err
	}
	var args map[string]any
	if err := json.Unmarshal(req.Arguments, &args); err != nil {
		return nil, fmt.Errorf("decode arguments of call %s: %w", a.CallID, err)
	}
	def := rt.def
	r := &Review{Level: def.Security.Level, Description: def.Description, SessionID: rec.SessionID,
		Findings: inv.findings(def, args), Refusal: inv.securityRefusal(def, args)}
	switch {
	case def.Security.Level == tooldef.LevelDangerous:
		r.Why = "its level is dangerous: every call of it waits for a reviewer"
	case def.Security.RequireConfirm:
		r.Why = "the tool asks for confirmation of every call (requireConfirm), whatever its level"
	default:
		r.Why = "a step of this composite tool needs approval, so the whole call does"
	}
	if rec.SessionID != "" {
		sel, err := inv.store.LastSelectionOf(ctx, rec.PrincipalID, rec.SessionID, rec.CreatedAt)
		switch {
		case err == nil:
			r.Task = sel.Query
		case err != nil && !errors.Is(err, models.ErrNotFound):
			return nil, err
		}
	}
	return r, nil
}

// findings says what the checks read in the arguments they look at: the
// command a shell tool runs, parsed; the host a URL reaches; where a path
// leads in the work directory.
func (inv *Invoker) findings(def tooldef.Definition, args map[string]any) []Finding {
	var out []Finding
	if cmd, ok := args["command"].(string); ok && def.Category == "shell" {
		out = append(out, Finding{"command", commandFinding(cmd)})
	}
	if u, ok := args["url"].(string); ok {
		what := "not a URL"
		if parsed, err := url.Parse(u); err == nil && parsed.Host != "" {
			what = fmt.Sprintf("%s to %s", strings.ToUpper(parsed.Scheme), parsed.Hostname())
			if msg := inv.net.CheckURL(u); msg != "" {
				what += ": refused, " + msg
			} else {
				what += ", which the outbound policy allows"
			}
		}
		out = append(out, Finding{"url", what})
	}
	if p, ok := args["path"].(string); ok && (def.Category == "filesystem" || isFileBuiltin(def)) {
		what := fmt.Sprintf("the file %s in the session's work directory", filepath.Clean(strings.ReplaceAll(p, `\`, "/")))
		if msg := checkPath(p, def.Security.AllowedPaths); msg != "" {
			what = "refused: " + msg
		}
		out = append(out, Finding{"path", what})
	}
	return out
}

// commandFinding names the program a command line runs and its
// arguments, as the shell would split them (mvdan.cc/sh), or says what
// else it holds.
func commandFinding(cmd string) string {
	file, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		return "does not parse as shell: " + err.Error()
	}
	if len(file.Stmts) != 1 {
		return fmt.Sprintf("%d commands", len(file.Stmts))
	}
	call, ok := file.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) == 0 || len(file.Stmts[0].Redirs) > 0 {
		return "not one plain command: it chains, pipes, redirects or groups"
	}
	words := make([]string, len(call.Args))
	for i, w := range call.Args {
		// Quotes removed as the shell would; a word that expands
		// (a variable, a substitution) is shown as written.
		lit, err := expand.Literal(&expand.Config{}, w)
		if err != nil || strings.ContainsAny(cmd, "$`") {
			var b strings.Builder
			_ = syntax.NewPrinter().Print(&b, w)
			lit = b.String()
		}
		words[i] = lit
	}
	switch len(words) {
	case 1:
		return "runs " + words[0] + " with no arguments"
	case 2:
		return fmt.Sprintf("runs %s with 1 argument: %q", words[0], words[1])
	}
	return fmt.Sprintf("runs %s with %d arguments: %s", words[0], len(words)-1, strings.Join(quoteEach(words[1:]), " "))
}

func quoteEach(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = fmt.Sprintf("%q", w)
	}
	return out
}
