package web

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/handlers"
	"toolbelt/handlers/mcpserver"
	"toolbelt/models"
	"toolbelt/services/runners"
)

// MCPPath serves the Model Context Protocol (streamable HTTP) to every role;
// what each may do there is decided per tool by the guard chain.
const MCPPath = "/mcp"

// mcpMethods are the methods of the streamable HTTP transport: POST sends
// messages, GET opens the server's event stream, DELETE ends a session.
var mcpMethods = []string{http.MethodPost, http.MethodGet, http.MethodDelete}

// MCPSessionTimeout closes an MCP session idle this long, so abandoned
// sessions do not pile up in memory.
const MCPSessionTimeout = 30 * time.Minute

// StatelessProtocolVersion is the first MCP version without sessions
// (SEP-2575): a request that names it, or a later one, in its
// MCP-Protocol-Version header is served by the go-sdk's stateless
// transport, which alone speaks it; the rest by the session transport.
const StatelessProtocolVersion = "2026-07-28"

// principalCtxKey carries the authenticated principal from Gin to the MCP
// transport in the request's context.
type principalCtxKey struct{}

// mountMCP serves /mcp behind the Origin check (checkOrigin) and the same
// authentication and Casbin check as the API. The SDK's bearer middleware
// then turns the principal into the session's token info, which binds
// each MCP session to its principal and lets every message act as the
// principal that sent it. Both transports serve the one protocol server,
// so a client gets the same answers at every version it negotiates.
func mountMCP(r *gin.Engine, d Deps) {
	srv := d.MCP
	opts := mcp.StreamableHTTPOptions{
		SessionTimeout: MCPSessionTimeout, Logger: d.Log,
		// The SDK refuses a request that reached a loopback address
		// under another Host name (DNS rebinding), which is every
		// request through a reverse proxy on this host. Rebinding
		// matters for servers that trust whoever can reach them; every
		// request here carries an API key a rebinding page cannot know.
		DisableLocalhostProtection: true,
	}
	sessions := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() }, &opts)
	statelessOpts := opts
	statelessOpts.Stateless = true
	// Under 2026-07-28 the POST is the request's whole life: a client
	// cancels a call by ending it (the Vercel AI SDK and the MCP SDK v2
	// send no notifications/cancelled), so its end cancels the handler,
	// and with it a call held open for approval (mcpserver's follow).
	statelessOpts.PropagateRequestCancellation = true
	stateless := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() }, &statelessOpts)
	sessionful := requireInitialize(sessions)
	streamable := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("MCP-Protocol-Version") >= StatelessProtocolVersion {
			// tools/call and tools/list are answered without the SDK's
			// per-request session (mcpserver.ServeStateless), the rest by it.
			p, _ := r.Context().Value(principalCtxKey{}).(*models.Principal)
			if p != nil && srv.ServeStateless(w, r, p, runners.SubjectTokenOf(r.Context())) {
				return
			}
			stateless.ServeHTTP(w, r)
			return
		}
		sessionful.ServeHTTP(w, r)
	})
	verified := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		p, _ := ctx.Value(principalCtxKey{}).(*models.Principal)
		if p == nil {
			return nil, auth.ErrInvalidToken
		}
		return mcpserver.TokenInfo(p, runners.SubjectTokenOf(ctx)), nil
	}, nil)(streamable)
	serve := func(c *gin.Context) {
		p := handlers.CurrentPrincipal(c)
		// A POST without a session id opens a session: one principal may
		// hold only so many at once (the SDK closes idle ones after
		// MCPSessionTimeout). At the cap, the principal's least recently
		// used idle session makes room; only busy ones refuse.
		if d.MCPSessions != nil && c.Request.Method == http.MethodPost && c.GetHeader("Mcp-Session-Id") == "" &&
			c.GetHeader("MCP-Protocol-Version") < StatelessProtocolVersion {
			if d.MCPSessions.Full(p.ID, srv.SessionsOf(p.ID)) && srv.EvictIdle(c.Request.Context(), p.ID) {
				d.Metrics.MCPSessionEvicted()
			}
			release, err := d.MCPSessions.Take(p.ID, srv.SessionsOf(p.ID))
			if err != nil {
				d.Handler.Fail(c, err)
				return
			}
			// By the time the answer is written the session counts among
			// SessionsOf: the hold goes then, before the client can open
			// another (after the handler returned, both counted it).
			defer release()
			c.Writer = releaseOnAnswer{c.Writer, release}
		}
		if id := c.GetHeader("Mcp-Session-Id"); id != "" {
			// Busy while answered: a session is evicted only when idle.
			defer srv.Using(id)()
		}
		ctx := context.WithValue(c.Request.Context(), principalCtxKey{}, p)
		verified.ServeHTTP(c.Writer, c.Request.WithContext(ctx))
	}
	for _, m := range mcpMethods {
		r.Handle(m, MCPPath, checkOrigin(d), authenticate(d), serve)
	}
	r.OPTIONS(MCPPath, checkOrigin(d), preflight)
}

// releaseOnAnswer calls release as the first byte of the answer (or its
// header) is written.
type releaseOnAnswer struct {
	gin.ResponseWriter
	release func()
}

func (w releaseOnAnswer) WriteHeader(code int) { w.release(); w.ResponseWriter.WriteHeader(code) }

func (w releaseOnAnswer) WriteHeaderNow() { w.release(); w.ResponseWriter.WriteHeaderNow() }

func (w releaseOnAnswer) Write(b []byte) (int, error) { w.release(); return w.ResponseWriter.Write(b) }

func (w releaseOnAnswer) WriteString(s string) (int, error) {
	w.release()
	return w.ResponseWriter.WriteString(s)
}

func (w releaseOnAnswer) Flush() { w.release(); w.ResponseWriter.Flush() }
