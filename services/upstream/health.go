package upstream

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"toolbelt/services/ops"
)

// Health is the upstreams' component of readiness: each enabled server's
// state here (connected, idle, or failing and when it is tried again) and
// the tool changes waiting for an admin. A failing server, or a change
// waiting, degrades it.
func (m *Manager) Health(ctx context.Context) ops.Component {
	servers, err := m.Servers(ctx)
	if err != nil {
		return ops.Component{Status: ops.StatusDegraded, Detail: "cannot list the upstream servers: " + err.Error()}
	}
	if len(servers) == 0 {
		return ops.Component{Status: ops.StatusOK, Detail: "none"}
	}
	m.mu.Lock()
	failing := map[string]failure{}
	for key, f := range m.failures {
		failing[key.server] = f
	}
	m.mu.Unlock()
	comp := ops.Component{Status: ops.StatusOK}
	var parts []string
	for _, s := range servers {
		state := "idle"
		switch f, bad := failing[s.Name]; {
		case s.DisabledAt != nil:
			state = "disabled"
		case bad:
			comp.Status = ops.StatusDegraded
			state = fmt.Sprintf("failing (%v), tried again in %s", f.err, time.Until(f.until).Round(time.Second))
		case s.Connections > 0:
			state = map[bool]string{true: "1 connection", false: fmt.Sprintf("%d connections", s.Connections)}[s.Connections == 1]
		}
		var pending []string
		for _, t := range s.Tools {
			if t.PendingHash != "" {
				pending = append(pending, t.Remote)
			}
		}
		if len(pending) > 0 {
			comp.Status = ops.StatusDegraded
			slices.Sort(pending)
			state += "; changes waiting for an admin: " + strings.Join(pending, ", ")
		}
		parts = append(parts, fmt.Sprintf("%s (%s): %s", s.Name, s.Transport, state))
	}
	comp.Detail = strings.Join(parts, "; ")
	return comp
}
