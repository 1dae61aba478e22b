package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"toolbelt/models"
	"toolbelt/services/redact"
	"toolbelt/services/runners"
)

// Server is an upstream as the API shows it: its registration (secret
// values are references, never values), whether it is connected, and its
// tools.
type Server struct {
	models.Upstream
	// Connections is how many connections (stdio processes) are open here.
	Connections int `json:"connections"`
	// Failing says why connecting fails here, while it waits to try again.
	Failing string `json:"failing,omitempty"`
	// Stderr is the end of what its last stdio process here wrote to its
	// standard error.
	Stderr string `json:"stderr,omitempty"`
	// AuthType is how callers reach it: "oauth" or "exchange" (each as
	// their person), "personal" (their own secrets), "" (the
	// registration's own headers, the same for everyone).
	AuthType string `json:"auth_type,omitempty" enums:"oauth,exchange,personal"`
	// PeopleConnected is how many people connected their account (oauth).
	PeopleConnected int `json:"people_connected"`
	// Unlisted, for a personal server with no tools yet, says how they
	// get listed: with an admin's own connection.
	Unlisted string `json:"unlisted,omitempty"`
	Tools    []Tool `json:"tools"`
}

// Tool is one tool an upstream serves or served.
type Tool struct {
	models.UpstreamTool
	// Accepted and Pending are the definitions as served (the MCP tool),
	// Pending only while a change waits; Changes names the fields that
	// differ between them.
	Accepted json.RawMessage `json:"accepted,omitempty" swaggertype:"object"`
	Pending  json.RawMessage `json:"pending,omitempty" swaggertype:"object"`
	Changes  []string        `json:"changes,omitempty"`
}

// Servers lists every upstream with its tools.
func (m *Manager) Servers(ctx context.Context) ([]Server, error) {
	ups, err := m.d.Store.Upstreams(ctx)
	if err != nil {
		return nil, err
	}
	counts, err := m.d.Store.ConnectedCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Server, 0, len(ups))
	for i := range ups {
		s, err := m.server(ctx, &ups[i], counts)
		if err != nil {
			return nil, err
		}
		out = append(out, *s)
	}
	return out, nil
}

// Server returns one upstream with its tools.
func (m *Manager) Server(ctx context.Context, name string) (*Server, error) {
	u, err := m.d.Store.UpstreamByName(ctx, name)
	if err != nil {
		return nil, err
	}
	counts, err := m.d.Store.ConnectedCounts(ctx)
	if err != nil {
		return nil, err
	}
	return m.server(ctx, u, counts)
}

// server is u as shown; connected is how many people connected an
// account, per server (Store.ConnectedCounts).
func (m *Manager) server(ctx context.Context, u *models.Upstream, connected map[string]int) (*Server, error) {
	rows, err := m.d.Store.UpstreamTools(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	s := &Server{Upstream: *u, Connections: m.Warm()[u.Name], Tools: make([]Tool, 0, len(rows)), PeopleConnected: connected[u.Name]}
	switch {
	case u.Auth != nil:
		s.AuthType = u.Auth.Type
		if len(rows) == 0 {
			s.Unlisted = "its tools are listed with an admin's own account: connect yours at " + m.ConnectURL(u.Name) + ", then sync"
		}
	case personal(u):
		s.AuthType = "personal"
		if len(rows) == 0 {
			s.Unlisted = "its tools are listed with an admin's own secrets (" + strings.Join(personalSecrets(u), ", ") + "): store yours at " +
				strings.TrimRight(m.d.PublicURL, "/") + runners.SecretsPage + ", then sync"
		}
	}
	// Values stored before literal credentials were refused show masked.
	s.Headers, s.Env = redact.MaskCredentials(u.Headers), redact.MaskCredentials(u.Env)
	m.mu.Lock()
	for key, f := range m.failures {
		if key.server == u.Name {
			s.Failing = fmt.Sprintf("%v; tried again in %s", f.err, time.Until(f.until).Round(time.Second))
		}
	}
	m.mu.Unlock()
	if st, ok := m.d.Stdio.(interface{ StderrTail(string) string }); ok {
		s.Stderr = st.StderrTail(u.Name)
	}
	for _, r := range rows {
		t := Tool{UpstreamTool: r}
		if r.Accepted != "" {
			t.Accepted = json.RawMessage(r.Accepted)
		}
		if r.Pending != "" {
			t.Pending = json.RawMessage(r.Pending)
			t.Changes = changes(r.Accepted, r.Pending)
		}
		s.Tools = append(s.Tools, t)
	}
	return s, nil
}

// changes names the fields of a served definition that differ.
func changes(accepted, pending string) []string {
	var a, p map[string]any
	_ = json.Unmarshal([]byte(accepted), &a)
	_ = json.Unmarshal([]byte(pending), &p)
	var out []string
	for _, f := range []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"} {
		if !reflect.DeepEqual(a[f], p[f]) {
			out = append(out, f)
		}
	}
	return out
}
