package upstream

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
	"toolbelt/services/runners"
	"toolbelt/services/tooldef"
)

// stdioTransport: a command Toolbelt starts in the sandbox (Deps.Stdio)
// and talks to over its standard input and output.
var stdioTransport = Transport{
	Name:        models.TransportStdio,
	Description: "a command run in the sandbox, spoken to over its standard input and output",
	Fields:      []string{"command", "env", "mounts", "egress", "isolation"},
	check:       checkStdio,
	open:        openStdio,
}

func checkStdio(s *Spec, ps *models.Problems) {
	if len(s.Command) == 0 || strings.TrimSpace(s.Command[0]) == "" {
		ps.Add("/command", "is required for stdio: the program and its arguments, e.g. [\"npx\", \"@modelcontextprotocol/server-memory\"]")
	}
	for i, a := range s.Command {
		if strings.ContainsRune(a, 0) {
			ps.Add(fmt.Sprintf("/command/%d", i), "must not contain NUL")
		}
	}
	if s.URL != "" || len(s.Headers) > 0 {
		ps.Add("/url", "url and headers are for http and sse servers, not stdio")
	}
	for name, dir := range s.Mounts {
		ptr := "/mounts/" + tooldef.EscapePointer(name)
		if !mountName.MatchString(name) {
			ps.Add(ptr, "%q must be a lower-case letter or digit, then up to 31 of them, '.', '_' or '-': the directory /opt/<name>", name)
		}
		if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
			ps.Add(ptr, "%q must be an absolute, clean path to a directory on the server", dir)
		}
	}
	checkEgress(s.Egress, ps)
	for name, v := range s.Env {
		ptr := "/env/" + tooldef.EscapePointer(name)
		if !envName(name) {
			ps.Add(ptr, "%q is not an environment variable name (letters, digits and '_')", name)
		}
		checkSecretRefs(ptr, v, tooldef.SecretHeader.MatchString(name), ps)
	}
}

func openStdio(ctx context.Context, m *Manager, u *models.Upstream, c *conn, call *runners.Call, as *models.Principal) (mcp.Transport, error) {
	if m.d.Stdio == nil {
		return nil, fmt.Errorf("stdio servers cannot run on this server (no sandbox)")
	}
	env, err := m.environment(ctx, u, as)
	if err != nil {
		return nil, err
	}
	// The process outlives the call that started it: its context is not
	// the call's.
	return m.d.Stdio.Start(context.WithoutCancel(ctx), u, call, c.key.person, env)
}
