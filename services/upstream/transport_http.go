package upstream

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
	"toolbelt/services/runners"
	"toolbelt/services/tooldef"
)

// streamableHTTPTransport: a remote server's Streamable HTTP endpoint.
var streamableHTTPTransport = Transport{
	Name:        models.TransportHTTP,
	Description: "a remote server's Streamable HTTP endpoint",
	Fields:      remoteFields,
	check:       checkRemote,
	open: func(ctx context.Context, m *Manager, u *models.Upstream, c *conn, _ *runners.Call, as *models.Principal) (mcp.Transport, error) {
		client, err := m.remoteClient(ctx, u, c, as)
		if err != nil {
			return nil, err
		}
		return &mcp.StreamableClientTransport{Endpoint: u.URL, HTTPClient: client, MaxRetries: -1}, nil
	},
}

// remoteFields are what a server reached over HTTP takes (http, sse).
var remoteFields = []string{"url", "headers", "auth"}

// checkRemote checks the fields of a server reached over HTTP.
func checkRemote(s *Spec, ps *models.Problems) {
	if !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
		ps.Add("/url", "%q must be an absolute http or https URL", s.URL)
	}
	if len(s.Egress) > 0 {
		ps.Add("/egress", "is for stdio servers: a remote server is reached under the outbound-address policy")
	}
	if len(s.Command) > 0 || len(s.Env) > 0 || len(s.Mounts) > 0 {
		ps.Add("/command", "command, env and mounts are for stdio servers")
	}
	if s.Isolation != models.IsolationShared {
		ps.Add("/isolation", "only stdio servers run one process per session")
	}
	for name, v := range s.Headers {
		ptr := "/headers/" + tooldef.EscapePointer(name)
		if http.CanonicalHeaderKey(name) == "" || strings.ContainsAny(name, " :\r\n") {
			ps.Add(ptr, "%q is not an HTTP header name", name)
		}
		checkSecretRefs(ptr, v, tooldef.SecretHeader.MatchString(name), ps)
	}
}

// remoteClient is the HTTP client of the connection c to a server
// reached over HTTP: under the outbound policy, with its headers, and
// with the person's token when it has Auth (c.auth says when the server
// refused it).
func (m *Manager) remoteClient(ctx context.Context, u *models.Upstream, c *conn, as *models.Principal) (*http.Client, error) {
	if msg := m.d.Net.CheckURL(u.URL); msg != "" {
		return nil, fmt.Errorf("the outbound policy refuses %s: %s", u.URL, msg)
	}
	client, err := m.httpClient(ctx, u, as)
	if err != nil || u.Auth == nil {
		return client, err
	}
	client, c.auth, err = authClient(client, u, func(ctx context.Context) (string, error) {
		return m.token(ctx, u, &runners.Call{Principal: as})
	})
	return client, err
}
