package invoke

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"toolbelt/models"
	"toolbelt/services/sandbox"
	"toolbelt/services/tooldef"
)

// secure makes the session's work directory and, before anything runs,
// confines file paths to it and to the tool's allowedPaths, refuses shell
// commands that chain, pipe or redirect (unless the tool allows it), and
// URLs the egress policy would not fetch.
func (inv *Invoker) secure(next step) step {
	return func(ctx context.Context, c *call) ToolResult {
		// Work directories belong to a principal and a session: two agents
		// using the same session id never share files.
		dir, err := inv.runners.WorkDir(principalID(c.caller), c.req.SessionID)
		if err != nil {
			inv.log.ErrorContext(ctx, "make work directory", "err", err, "call_id", c.id)
			if disk := models.FullDisk(err); disk != "" {
				return failure(models.CodeStorageFull, disk+" is full: the session's work directory cannot be made", true,
					"Try again later: the server's administrator must free space first.")
			}
			return failure(models.CodeInternal, "internal error", true, "Try again.")
		}
		c.dir = dir
		if refused := inv.securityRefusal(c.def, c.args); refused != nil {
			return ToolResult{Status: models.StatusRefused, Error: refused}
		}
		return next(ctx, c)
	}
}

// securityRefusal is what the security checks answer a call of def with
// args: a refusal, or nil when they pass. The secure guard runs them
// before anything runs; a reviewer sees their verdict before approving
// (ReviewOf).
func (inv *Invoker) securityRefusal(def tooldef.Definition, args map[string]any) *ToolError {
	refuse := func(code, msg, hint string) *ToolError { return refusal(code, msg, hint).Error }
	if cmd, ok := args["command"].(string); ok && def.Category == "shell" {
		if msg := checkCommand(cmd, def.Security.ShellOperators); msg != "" {
			return refuse(models.CodeCommandRejected, msg,
				"Send one plain command with its arguments; run the steps as separate calls instead of chaining, piping or redirecting.")
		}
	}
	if u, ok := args["url"].(string); ok {
		if msg := inv.net.CheckURL(u); msg != "" {
			return refuse(models.CodeURLNotAllowed, msg, "Use a public http or https URL; internal addresses are never fetched.")
		}
	}
	if def.Category != "filesystem" && !isFileBuiltin(def) {
		return nil
	}
	if p, ok := args["path"].(string); ok {
		if msg := checkPath(inv.underWorkPath(def, p), def.Security.AllowedPaths); msg != "" {
			return refuse(models.CodePathNotAllowed, msg,
				"Use a path relative to the session work directory, inside "+strings.Join(allowedOrDot(def.Security.AllowedPaths), ", ")+", without \"..\".")
		}
	}
	return nil
}

// underWorkPath is p made relative when def is a tool of a stdio
// upstream server and p names a place under the work directory as the
// server sees it in the sandbox (/work under bubblewrap: the root a
// filesystem server is given and lists), else p. It only takes the root
// off: what follows ("..", another absolute path) is checkPath's to
// refuse, and a path beside the root (/workx) stays absolute.
func (inv *Invoker) underWorkPath(def tooldef.Definition, p string) string {
	box := inv.runners.Sandbox()
	if def.Runner.Kind != tooldef.RunnerMCP || !def.Security.Sandbox || box == nil {
		return p
	}
	root := box.WorkPath(sandbox.Spec{})
	if root == "" || !filepath.IsAbs(root) {
		return p // the server sees the session's own host path: nothing fixed to strip
	}
	if p == root {
		return "."
	}
	if rest, ok := strings.CutPrefix(p, root+"/"); ok && rest != "" {
		return rest
	}
	return p
}

// isFileBuiltin reports whether the tool runs one of the file built-ins,
// whatever its category.
func isFileBuiltin(def tooldef.Definition) bool {
	return def.Runner.Kind == tooldef.RunnerBuiltin && strings.HasPrefix(def.Runner.Builtin, "file_")
}

func allowedOrDot(paths []string) []string {
	if len(paths) == 0 {
		return []string{"."}
	}
	return paths
}

// checkPath says why a path may not be used, or "" when it may: it must be
// relative, free of NUL and "..", and inside one of the allowed roots.
// os.Root enforces the same at run time, symlinks included.
func checkPath(p string, allowed []string) string {
	switch {
	case p == "":
		return "path is empty"
	case strings.ContainsRune(p, 0):
		return "path contains a NUL byte"
	case filepath.IsAbs(p) || strings.HasPrefix(p, `\`) || (len(p) > 1 && p[1] == ':'):
		return fmt.Sprintf("path %q is absolute", p)
	}
	parts := strings.Split(strings.ReplaceAll(p, `\`, "/"), "/")
	if slices.Contains(parts, "..") {
		return fmt.Sprintf("path %q leaves the work directory", p)
	}
	clean := filepath.Clean(strings.ReplaceAll(p, `\`, "/"))
	for _, root := range allowedOrDot(allowed) {
		root = filepath.Clean(root)
		if root == "." || clean == root || strings.HasPrefix(clean, root+string(filepath.Separator)) {
			return ""
		}
	}
	return fmt.Sprintf("path %q is outside the tool's allowed paths", p)
}
