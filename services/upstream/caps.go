package upstream

import (
	"fmt"
	"path/filepath"
	"time"

	"toolbelt/models"
	"toolbelt/services/runners"
)

// ProcessCaps bound the processes of each session-isolated stdio server
// on this instance: one per session would otherwise let one agent start
// as many as it names sessions.
type ProcessCaps struct {
	// PerServer bounds a server's session processes.
	PerServer int
	// PerPrincipal bounds those one principal's sessions hold of one
	// server, so one principal cannot take the whole of PerServer.
	PerPrincipal int
}

// DefaultProcessCaps: 8 processes of a server keep a node server's
// memory within a fraction of a GiB (docs/upstreams.md has its figure);
// 4 per principal let an agent work in a few sessions at once and leave
// at least half of a server to the other principals.
func DefaultProcessCaps() ProcessCaps { return ProcessCaps{PerServer: 8, PerPrincipal: 4} }

// CapRetryAfter is the wait, in seconds, a call refused by a cap is told
// to take: about a call's length, after which a process may be idle.
const CapRetryAfter = 5

// principalOf is the principal a session key belongs to: the session's
// work directory is sessions/p<principal>/<session>.
func principalOf(session string) string { return filepath.Dir(session) }

// makeRoom reserves a place for a new process of key under m.caps,
// with m.mu held: it stops (returns, for the caller to close) the least
// recently used idle process of the principal when the principal's cap
// is reached, else of the server when the server's is, and refuses with
// RATE_LIMIT_EXCEEDED when every process in the way has a call in
// flight. Processes being started count as busy.
func (m *Manager) makeRoom(key connKey) (*conn, error) {
	caps := m.d.Caps
	if caps.PerServer < 1 {
		caps = DefaultProcessCaps()
	}
	principal := principalOf(key.session)
	var server, mine []*conn
	nServer, nMine := 0, 0
	count := func(k connKey) {
		if k.server != key.server || k.session == "" {
			return
		}
		nServer++
		if principalOf(k.session) == principal {
			nMine++
		}
	}
	for k, c := range m.cns {
		count(k)
		if k.server == key.server && k.session != "" && !c.idleSince().IsZero() {
			server = append(server, c)
			if principalOf(k.session) == principal {
				mine = append(mine, c)
			}
		}
	}
	for k := range m.starting {
		count(k)
	}
	var victim *conn
	switch {
	case nMine >= caps.PerPrincipal:
		if victim = leastRecent(mine); victim == nil {
			return nil, m.capRefusal(key.server, fmt.Sprintf("your sessions hold %d processes of the upstream server %s, the most one caller may, and each has a call in flight", nMine, key.server),
				"Wait for one of your calls to finish, or call again in the same session_id as a running one.")
		}
	case nServer >= caps.PerServer:
		if victim = leastRecent(server); victim == nil {
			return nil, m.capRefusal(key.server, fmt.Sprintf("the upstream server %s runs %d processes, its most, and each has a call in flight", key.server, nServer),
				"Wait a few seconds and call again.")
		}
	default:
		return nil, nil
	}
	delete(m.cns, victim.key)
	m.evicted[key.server]++
	m.d.Log.Info("upstream process stopped for a new session: the cap is reached", "server", key.server, "session", victim.key.session, "for", key.session)
	return victim, nil
}

// leastRecent is the connection idle the longest, nil for none.
func leastRecent(cs []*conn) *conn {
	var out *conn
	var at time.Time
	for _, c := range cs {
		if since := c.idleSince(); out == nil || since.Before(at) {
			out, at = c, since
		}
	}
	return out
}

// capRefusal counts and makes a refusal by a cap.
func (m *Manager) capRefusal(server, msg, suggestion string) error {
	m.capRefused[server]++
	return &runners.Error{Code: models.CodeRateLimit, Message: msg, Suggestion: suggestion, Retryable: true, RetryAfter: CapRetryAfter}
}
