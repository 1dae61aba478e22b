package upstream

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
	"toolbelt/services/runners"
)

// sseTransport: a remote server's legacy HTTP+SSE endpoint (protocol
// 2024-11-05), for servers not yet on Streamable HTTP.
var sseTransport = Transport{
	Name:        models.TransportSSE,
	Description: "a remote server's legacy HTTP+SSE endpoint",
	Fields:      remoteFields,
	check:       checkRemote,
	open: func(ctx context.Context, m *Manager, u *models.Upstream, c *conn, _ *runners.Call, as *models.Principal) (mcp.Transport, error) {
		client, err := m.remoteClient(ctx, u, c, as)
		if err != nil {
			return nil, err
		}
		return &mcp.SSEClientTransport{Endpoint: u.URL, HTTPClient: client}, nil
	},
}
