package access

import (
	"sync"

	"toolbelt/models"
)

// PrincipalCaps bound what one principal may hold at once of a resource
// every principal shares, so that no agent can take it all: calls waiting
// for a reviewer (rows of the shared database, so the cap holds in the
// cluster), and on each instance the MCP sessions and call event streams
// it keeps open (they live in that instance's memory).
type PrincipalCaps struct {
	PendingApprovals int
	MCPSessions      int
	EventStreams     int
}

// DefaultPrincipalCaps are the caps unless configured.
func DefaultPrincipalCaps() PrincipalCaps {
	return PrincipalCaps{PendingApprovals: 20, MCPSessions: 16, EventStreams: 64}
}

// Holds counts what each principal holds of one resource on this
// instance, up to a cap.
type Holds struct {
	what    string // "event streams"
	max     int
	refused func() // counts a refusal (a metric), or nil
	mu      sync.Mutex
	held    map[uint]int
}

// NewHolds returns the holds of a resource named what (plural), at most
// max each; refused, when set, is told of each refusal.
func NewHolds(what string, max int, refused func()) *Holds {
	return &Holds{what: what, max: max, refused: refused, held: map[uint]int{}}
}

// Full says whether principal id, holding others besides those counted
// here, is at its cap: Take would refuse it.
func (h *Holds) Full(id uint, others int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[id]+others >= h.max
}

// Take holds one more for principal id, besides others it holds that are
// counted elsewhere, and returns its release; past the cap it holds
// nothing and answers models.ErrRateLimited saying so.
func (h *Holds) Take(id uint, others int) (release func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := h.held[id] + others; n >= h.max {
		if h.refused != nil {
			h.refused()
		}
		return nil, models.ErrRateLimited.Errorf("you hold %d %s open on this server, the most one principal may; close one first", n, h.what)
	}
	h.held[id]++
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.held[id]--; h.held[id] <= 0 {
				delete(h.held, id)
			}
		})
	}, nil
}
