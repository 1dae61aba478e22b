package mcpserver

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
)

// Many MCP clients never end their session: the TypeScript SDK's and
// LangChain's close(), an Inspector CLI run, a conformance scenario each
// drop the connection and leave the session open until it idles out. A
// principal at its cap of sessions would then be refused a new one for
// half an hour, so the cap makes room instead: the principal's least
// recently used session that nothing keeps busy is closed (EvictIdle),
// and its next request is answered 404, which tells a client to
// initialize again. A session is busy while a request of it is being
// answered (a tools/call, a held call_result wait, the GET event stream)
// or while a call it made waits for a reviewer or runs.

// sessionUse is what the server knows of one open MCP session.
type sessionUse struct {
	ss    *mcp.ServerSession
	owner *models.Principal
	// busy counts the session's HTTP requests being answered; last is
	// when one began or ended.
	busy int
	last time.Time
	// opened is when the session was initialized.
	opened time.Time
	// waiting are the calls the session made that were answered before
	// they ended (parked for a reviewer): read again before eviction.
	waiting map[string]bool
	// gone is set when EvictIdle closes the session.
	gone bool
}

// sessionUses tracks the open sessions by id.
type sessionUses struct {
	mu  sync.Mutex
	use map[string]*sessionUse
}

// opened records a session principal p initialized.
func (s *Server) opened(ss *mcp.ServerSession, p *models.Principal) {
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	if s.sessions.use == nil {
		s.sessions.use = map[string]*sessionUse{}
	}
	if u, ok := s.sessions.use[ss.ID()]; ok {
		u.owner = p
		return
	}
	s.sessions.use[ss.ID()] = &sessionUse{ss: ss, owner: p, last: time.Now(), opened: time.Now(), waiting: map[string]bool{}}
}

// Using marks the session named id (an Mcp-Session-Id) busy while one of
// its requests is answered; the transport calls it for each request and
// done when the answer ends. An unknown id is the SDK's to refuse.
func (s *Server) Using(id string) (done func()) {
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	u := s.sessions.use[id]
	if u == nil {
		return func() {}
	}
	u.busy++
	u.last = time.Now()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.sessions.mu.Lock()
			defer s.sessions.mu.Unlock()
			u.busy--
			u.last = time.Now()
		})
	}
}

// unended records a call of session ss that was answered before it ended.
func (s *Server) unended(ss *mcp.ServerSession, callID string) {
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	if u := s.sessions.use[ss.ID()]; u != nil {
		u.waiting[callID] = true
	}
}

// SessionsOf counts the MCP sessions principal id has open on this
// instance (sessions live in its memory), forgetting those that ended.
func (s *Server) SessionsOf(id uint) int {
	n := 0
	for _, u := range s.live() {
		if u.owner.ID == id {
			n++
		}
	}
	return n
}

// live are the sessions open on the server, least recently used first.
func (s *Server) live() []*sessionUse {
	// A session initialized while the SDK's were listed is live.
	at := time.Now()
	open := map[string]bool{}
	for ss := range s.mcp.Sessions() {
		open[ss.ID()] = true
	}
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	var out []*sessionUse
	for id, u := range s.sessions.use {
		if u.gone || !open[id] && u.opened.Before(at) {
			delete(s.sessions.use, id)
			continue
		}
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b *sessionUse) int { return a.last.Compare(b.last) })
	return out
}

// EvictIdle closes principal id's least recently used session that
// nothing keeps busy, and says whether there was one.
func (s *Server) EvictIdle(ctx context.Context, id uint) bool {
	for _, u := range s.live() {
		if u.owner.ID != id || s.working(ctx, u) {
			continue
		}
		s.sessions.mu.Lock()
		idle := u.busy == 0 && !u.gone
		u.gone = idle
		s.sessions.mu.Unlock()
		if !idle {
			continue
		}
		s.log.InfoContext(ctx, "mcp session closed for a new one of its principal", "session_id", u.ss.ID(), "principal_id", id)
		_ = u.ss.Close()
		return true
	}
	return false
}

// working says whether session u is busy: a request of it is being
// answered, or a call it made has not ended. Calls known to have ended
// are forgotten; one that cannot be read counts as working.
func (s *Server) working(ctx context.Context, u *sessionUse) bool {
	s.sessions.mu.Lock()
	busy := u.busy > 0
	var calls []string
	for id := range u.waiting {
		calls = append(calls, id)
	}
	s.sessions.mu.Unlock()
	if busy {
		return true
	}
	for _, id := range calls {
		rec, err := s.invoker.CallRecord(ctx, u.owner, id)
		if err != nil && models.CodeOf(err) != models.CodeNotFound {
			return true
		}
		if err == nil && !models.Terminal(rec.Status) {
			return true
		}
		s.sessions.mu.Lock()
		delete(u.waiting, id)
		s.sessions.mu.Unlock()
	}
	return false
}
