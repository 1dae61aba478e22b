package upstream

import (
	"context"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
	"toolbelt/services/runners"
)

// A Transport is one way Toolbelt reaches an upstream server. Each is
// declared once, in a file of its own (transport_*.go), and listed in
// Transports: a registration is validated and connected by its entry,
// and the console's list, the OpenAPI enum of a registration's transport
// and docs/upstreams.md are tested against the list.
type Transport struct {
	// Name is what a registration's transport says (models.Transport*).
	Name string
	// Description says what it is, in a line, for the console.
	Description string
	// Fields are the registration fields it takes beside those every
	// server has (name, transport, category, max_concurrent,
	// idle_seconds).
	Fields []string
	// check adds the problems of s's fields for this transport to ps.
	check func(s *Spec, ps *models.Problems)
	// open is the MCP transport of the connection c to u: call is the
	// call a session's process is started for (stdio with session
	// isolation, else nil), as the person a personal connection acts as.
	open func(ctx context.Context, m *Manager, u *models.Upstream, c *conn, call *runners.Call, as *models.Principal) (mcp.Transport, error)
}

// Transports are the upstream transports, in the order the console
// offers them.
func Transports() []Transport {
	return []Transport{stdioTransport, streamableHTTPTransport, sseTransport}
}

// TransportNames are the names of Transports, in order.
func TransportNames() []string {
	var names []string
	for _, t := range Transports() {
		names = append(names, t.Name)
	}
	return names
}

// transportNamed is the transport called name.
func transportNamed(name string) (Transport, bool) {
	ts := Transports()
	i := slices.IndexFunc(ts, func(t Transport) bool { return t.Name == name })
	if i < 0 {
		return Transport{}, false
	}
	return ts[i], true
}

// takes says whether a server of transport takes field.
func takes(transport, field string) bool {
	t, ok := transportNamed(transport)
	return ok && slices.Contains(t.Fields, field)
}
