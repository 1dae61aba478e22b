// Package web builds the HTTP server: the Gin engine, its middleware and
// the one route table, from which the Casbin endpoint policies are derived.
package web

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"toolbelt/docs"
	"toolbelt/handlers"
	"toolbelt/handlers/console"
	"toolbelt/handlers/mcpserver"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/authserver"
	"toolbelt/services/connect"
	"toolbelt/services/ops"
	"toolbelt/services/runners"
	"toolbelt/static"
)

// APIPrefix is where the JSON API lives.
const APIPrefix = "/api/v1"

// MetricsPath serves the Prometheus metrics, to admins.
const MetricsPath = "/metrics"

// route is one endpoint and the roles that may call it, served by a
// method of H: *handlers.Handler for the API, *console.Handler for the
// console's pages.
type route[H any] struct {
	method  string
	path    string
	roles   []string
	handler func(H, *gin.Context) error
}

var (
	everyone = []string{access.RoleAdmin, access.RoleReviewer, access.RoleAgent}
	admins   = []string{access.RoleAdmin}
	callers  = []string{access.RoleAdmin, access.RoleAgent}
	deciders = []string{access.RoleAdmin, access.RoleReviewer}
)

// routes is the one route table of the API. Who may call what is stated
// here and enforced by Casbin from the policies RolePolicies derives.
var routes = []route[*handlers.Handler]{
	{http.MethodGet, "/me", everyone, (*handlers.Handler).WhoAmI},
	{http.MethodGet, "/me/callback-secret", callers, (*handlers.Handler).CallbackSecret},
	{http.MethodPost, "/me/callback-secret/rotate", callers, (*handlers.Handler).RotateCallbackSecret},
	{http.MethodGet, "/me/connections", everyone, (*handlers.Handler).MyConnections},
	{http.MethodDelete, "/me/connections/:name", everyone, (*handlers.Handler).DisconnectMine},
	// Every role keeps its own secrets ({{user.secret.NAME}}); writing
	// them takes the secrets:write scope (ownScopes).
	{http.MethodGet, "/me/secrets", everyone, (*handlers.Handler).MySecrets},
	{http.MethodPut, "/me/secrets/:name", everyone, (*handlers.Handler).PutMySecret},
	{http.MethodDelete, "/me/secrets/:name", everyone, (*handlers.Handler).DeleteMySecret},

	{http.MethodGet, "/tools", everyone, (*handlers.Handler).ListTools},
	{http.MethodPost, "/tools", admins, (*handlers.Handler).RegisterTool},
	{http.MethodGet, "/tools/:name", everyone, (*handlers.Handler).GetTool},
	{http.MethodPut, "/tools/:name", admins, (*handlers.Handler).PublishTool},
	{http.MethodDelete, "/tools/:name", admins, (*handlers.Handler).RetireTool},
	{http.MethodGet, "/tools/:name/versions", everyone, (*handlers.Handler).ToolVersions},
	{http.MethodGet, "/tools/:name/versions/:version", everyone, (*handlers.Handler).ToolVersion},
	{http.MethodPost, "/tools/:name/rollback", admins, (*handlers.Handler).RollbackTool},
	{http.MethodGet, "/categories", everyone, (*handlers.Handler).Categories},
	{http.MethodPost, "/import/openapi", admins, (*handlers.Handler).ImportOpenAPI},

	{http.MethodGet, "/upstreams", admins, (*handlers.Handler).ListUpstreams},
	{http.MethodPost, "/upstreams", admins, (*handlers.Handler).AddUpstream},
	{http.MethodGet, "/upstreams/:name", admins, (*handlers.Handler).GetUpstream},
	{http.MethodPut, "/upstreams/:name", admins, (*handlers.Handler).UpdateUpstream},
	{http.MethodDelete, "/upstreams/:name", admins, (*handlers.Handler).DeleteUpstream},
	{http.MethodPost, "/upstreams/:name/sync", admins, (*handlers.Handler).SyncUpstream},
	{http.MethodPost, "/upstreams/:name/disable", admins, (*handlers.Handler).DisableUpstream},
	{http.MethodPost, "/upstreams/:name/enable", admins, (*handlers.Handler).EnableUpstream},
	{http.MethodPut, "/upstreams/:name/tools/:tool", admins, (*handlers.Handler).SetUpstreamTool},
	{http.MethodPost, "/upstreams/:name/tools/:tool/accept", admins, (*handlers.Handler).AcceptUpstreamTool},
	{http.MethodPut, "/upstreams/:name/tools/:tool/alias", admins, (*handlers.Handler).SetUpstreamToolAlias},
	{http.MethodPost, "/upstreams/:name/tools/:tool/disable", admins, (*handlers.Handler).DisableUpstreamTool},
	{http.MethodPost, "/upstreams/:name/tools/:tool/enable", admins, (*handlers.Handler).EnableUpstreamTool},

	{http.MethodPost, "/tools/select", everyone, (*handlers.Handler).SelectTools},
	{http.MethodPost, "/selections/:id/feedback", everyone, (*handlers.Handler).SelectionFeedback},
	{http.MethodGet, "/tools/:name/queries", admins, (*handlers.Handler).LearnedQueries},
	{http.MethodDelete, "/tools/:name/queries/:id", admins, (*handlers.Handler).ForgetQuery},

	{http.MethodPost, "/calls", callers, (*handlers.Handler).CallTool},
	{http.MethodGet, "/calls", everyone, (*handlers.Handler).ListCalls},
	{http.MethodGet, "/calls/:id", everyone, (*handlers.Handler).GetCall},
	{http.MethodDelete, "/calls/:id", callers, (*handlers.Handler).CancelCall},
	{http.MethodGet, "/calls/:id/events", everyone, (*handlers.Handler).CallEvents},

	{http.MethodGet, "/stats", deciders, (*handlers.Handler).GetStats},

	{http.MethodGet, "/approvals", deciders, (*handlers.Handler).ListApprovals},
	{http.MethodPost, "/approvals/:id/approve", deciders, (*handlers.Handler).Approve},
	{http.MethodPost, "/approvals/:id/deny", deciders, (*handlers.Handler).Deny},

	{http.MethodPost, "/principals", admins, (*handlers.Handler).CreatePrincipal},
	{http.MethodGet, "/principals", admins, (*handlers.Handler).ListPrincipals},
	{http.MethodPost, "/principals/:id/keys", admins, (*handlers.Handler).IssueKey},
	{http.MethodPost, "/principals/:id/disable", admins, (*handlers.Handler).DisablePrincipal},
	{http.MethodPost, "/principals/:id/enable", admins, (*handlers.Handler).EnablePrincipal},
	{http.MethodDelete, "/principals/:id", admins, (*handlers.Handler).DeletePrincipal},
	{http.MethodGet, "/principals/:id/grants", admins, (*handlers.Handler).Grants},
	{http.MethodPut, "/principals/:id/grants", admins, (*handlers.Handler).SetGrants},
	{http.MethodPost, "/principals/:id/callback-secret/rotate", admins, (*handlers.Handler).RotatePrincipalCallbackSecret},
	{http.MethodDelete, "/keys/:id", admins, (*handlers.Handler).RevokeKey},

	// The audit log is the admins': it names every principal and address.
	{http.MethodGet, "/audit", admins, (*handlers.Handler).ListAudit},
}

// RolePolicies returns, per role, the endpoints of the route table and the
// console pages it may open, and /metrics and /mcp, as Casbin seeds them.
func RolePolicies() map[string][]access.Route {
	out := map[string][]access.Route{}
	for _, r := range routes {
		for _, role := range r.roles {
			out[role] = append(out[role], access.Route{Method: r.method, Path: APIPrefix + r.path})
		}
	}
	for _, p := range pages {
		for _, role := range p.roles {
			out[role] = append(out[role], access.Route{Method: p.method, Path: ConsolePrefix + p.path})
		}
	}
	out[access.RoleAdmin] = append(out[access.RoleAdmin], access.Route{Method: http.MethodGet, Path: MetricsPath})
	for _, role := range everyone {
		for _, m := range mcpMethods {
			out[role] = append(out[role], access.Route{Method: m, Path: MCPPath})
		}
	}
	return out
}

// ownScopes are the routes that need another scope than their roles
// say (scopeOf): a caller changing its own credentials (its secrets, its
// connected accounts), which tools:read (what every role's routes open
// to all need) must not allow.
var ownScopes = map[string]string{
	http.MethodPut + " /me/secrets/:name":        access.ScopeSecrets,
	http.MethodDelete + " /me/secrets/:name":     access.ScopeSecrets,
	http.MethodDelete + " /me/connections/:name": access.ScopeSecrets,
}

// routeScope is the OAuth scope route r needs.
func routeScope(r route[*handlers.Handler]) string {
	if s, ok := ownScopes[r.method+" "+r.path]; ok {
		return s
	}
	return scopeOf(r.roles)
}

// scopeOf is the OAuth scope a route open to roles needs: the least role
// set names it, so a token's scopes narrow what its role allows.
func scopeOf(roles []string) string {
	switch {
	case slices.Equal(roles, admins):
		return access.ScopeAdmin
	case slices.Equal(roles, deciders):
		return access.ScopeApprove
	case slices.Equal(roles, callers):
		return access.ScopeCall
	}
	return access.ScopeRead
}

// ScopePolicies returns, per OAuth scope, the endpoints of the route table
// and /metrics and /mcp it opens, as Casbin seeds them. Console pages
// take no token: a person signs in to them.
func ScopePolicies() map[string][]access.Route {
	out := map[string][]access.Route{}
	for _, r := range routes {
		s := routeScope(r)
		out[s] = append(out[s], access.Route{Method: r.method, Path: APIPrefix + r.path})
	}
	out[access.ScopeAdmin] = append(out[access.ScopeAdmin], access.Route{Method: http.MethodGet, Path: MetricsPath})
	for _, m := range mcpMethods {
		out[access.ScopeRead] = append(out[access.ScopeRead], access.Route{Method: m, Path: MCPPath})
	}
	return out
}

// Deps are what the server needs from main.
type Deps struct {
	Handler *handlers.Handler
	// Console serves the admin console's pages; Handler.ErrorPage is
	// its error page.
	Console  *console.Handler
	Accounts *access.Accounts
	Authz    *access.Authz
	Log      *slog.Logger
	// Metrics, when set, are served at /metrics (admins) and receive
	// every request's route, status and latency.
	Metrics *ops.Metrics
	// MCP, when set, is served at /mcp to every role; MCPSessions, when
	// set, caps the sessions each principal holds open.
	MCP         *mcpserver.Server
	MCPSessions *access.Holds
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client (app.Config.TrustedProxies); none: the peer is.
	TrustedProxies []string
	// MCPAllowedOrigins are the web origins besides loopback pages whose
	// requests /mcp serves (app.Config.MCPAllowedOrigins).
	MCPAllowedOrigins []string
	// PublicURL is the server's origin as clients reach it
	// (app.Config.PublicURL): the name of its OAuth resources
	// ("<PublicURL>/mcp", "<PublicURL>/api/v1"). Empty: no
	// protected-resource metadata is served.
	PublicURL string
	// AuthorizationServers are the issuers whose access tokens Tokens
	// accept, listed in the protected-resource metadata.
	AuthorizationServers []string
	// Tokens verify the bearer tokens that are not API keys, asked in
	// order; none: only keys are accepted.
	Tokens []access.TokenVerifier
	// AuthServer, when set, is the embedded OAuth authorization server,
	// served at /oauth and /.well-known/oauth-authorization-server.
	AuthServer *authserver.Server
	// Connect, when set, is Toolbelt as the OAuth client of upstream
	// servers: its client ID metadata document is served.
	Connect *connect.Service
	// RequestLine, when set, writes each request's access line in place
	// of Log, as Log would (app writes the JSON line by hand); it
	// answers false for a line it leaves to Log.
	RequestLine func(RequestLine) bool
}

// RequestLine is what the access line of a request says, logged at the
// info level with the message "request".
type RequestLine struct {
	End                                   time.Time
	RequestID, Method, Path, Route, Actor string
	Status                                int
	Took                                  time.Duration
}

// New returns the HTTP handler of the whole service.
func New(d Deps) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.ContextWithFallback = true
	// Route on the escaped path so "%2F" inside a tool name reaches the
	// handler, which refuses it precisely, instead of changing the route.
	r.UseRawPath = true
	r.UnescapePathValues = true
	// gin believes every peer's X-Forwarded-For unless told otherwise: a
	// key guesser could then name a new address with each guess. Only
	// the configured proxies are believed (none by default), so
	// c.ClientIP() is the peer or the client a trusted proxy names.
	if err := r.SetTrustedProxies(d.TrustedProxies); err != nil {
		panic(fmt.Sprintf("trusted proxies %v: %v", d.TrustedProxies, err)) // app.ParseConfig checked them
	}
	r.Use(requestID(), accessLog(d.Log, d.Metrics, d.RequestLine), recovery(d.Handler), securityHeaders(), limitBody())
	r.NoRoute(consoleNotFound(d))
	r.NoMethod(d.Handler.MethodNotAllowed)

	r.GET("/", identify(d), d.Handler.Home)
	r.GET("/healthz", d.Handler.Healthz)
	r.HEAD("/healthz", d.Handler.Healthz)
	r.GET("/readyz", identify(d), d.Handler.Readyz)
	r.HEAD("/readyz", identify(d), d.Handler.Readyz)
	r.GET(static.Prefix+"*file", serveStatic)
	r.HEAD(static.Prefix+"*file", serveStatic)
	// Browsers ask for it whatever the page links.
	favicon := func(c *gin.Context) { static.Serve(c.Writer, c.Request, "favicon.svg") }
	r.GET("/favicon.ico", favicon)
	r.HEAD("/favicon.ico", favicon)
	// The OpenAPI 3 form of the document, converted by "make generate":
	// the one the Go client is generated from.
	r.GET(OpenAPI3Path, func(c *gin.Context) { c.Data(http.StatusOK, "application/json; charset=utf-8", docs.OpenAPI3JSON) })
	ui := swaggerUI()
	r.GET(SwaggerPrefix+"/*any", func(c *gin.Context) {
		if c.Param("any") == "/doc.json" {
			c.Data(http.StatusOK, "application/json; charset=utf-8", docs.JSON)
			return
		}
		ui(c)
	})

	mountResourceMetadata(r, d)
	mountConsole(r, d)
	if d.Metrics != nil {
		// Scrape with an admin key (Prometheus: authorization.credentials).
		r.GET(MetricsPath, authenticate(d), gin.WrapH(promhttp.HandlerFor(d.Metrics.Registry, promhttp.HandlerOpts{})))
	}

	if d.MCP != nil {
		mountMCP(r, d)
	}
	if d.AuthServer != nil {
		mountOAuth(r, d)
	}
	if d.Connect != nil {
		mountUpstreamClient(r, d)
	}

	api := r.Group(APIPrefix, authenticate(d))
	for _, rt := range routes {
		fn := rt.handler
		api.Handle(rt.method, rt.path, d.Handler.Wrap(func(c *gin.Context) error { return fn(d.Handler, c) }))
	}
	return r
}

// serveStatic answers a static file (static.Serve), or 404.
func serveStatic(c *gin.Context) {
	if !static.Serve(c.Writer, c.Request, strings.TrimPrefix(c.Param("file"), "/")) {
		c.String(http.StatusNotFound, "404 page not found")
	}
}

// authenticate resolves the bearer key or access token to a principal
// (401 when missing or wrong, with the OAuth challenge that says where to
// get a token) and asks Casbin whether its role, and a token's scopes, may
// use the matched route (403 when not). Nothing reaches a handler
// otherwise.
func authenticate(d Deps) gin.HandlerFunc {
	return func(c *gin.Context) {
		route, method := c.FullPath(), c.Request.Method
		token, ok := bearerToken(c.GetHeader("Authorization"))
		if !ok {
			challenge(c, d, route, "", neededScopes(route))
			d.Handler.Fail(c, models.ErrUnauthorized.Errorf("send your API key or access token as \"Authorization: Bearer <token>\""))
			return
		}
		// The peer's address, or the client a trusted proxy names; never
		// an X-Forwarded-For from anyone else, which a guesser could vary
		// at will.
		ip := c.ClientIP() // once: it parses the peer and walks the proxies
		p, key, grant, err := credentials(c, d, ip, token, route)
		if err != nil {
			if errors.Is(err, models.ErrUnauthorized) {
				challenge(c, d, route, "invalid_token", neededScopes(route))
			}
			d.Handler.Fail(c, err)
			return
		}
		allowed, err := d.Authz.CanAccess(p.Role, route, method)
		if err == nil && allowed && grant != nil {
			allowed, err = d.Authz.ScopesAllow(grant.Scopes, route, method)
			if err == nil && !allowed {
				refuseScope(c, d, route, method, grant, scopeOfRoute(route, method))
				return
			}
		}
		if err != nil {
			d.Handler.Fail(c, fmt.Errorf("authorize %s %s: %w", method, route, err))
			return
		}
		if !allowed {
			d.Handler.Fail(c, models.ErrForbidden.Errorf("role %s may not %s %s", p.Role, method, route))
			return
		}
		if grant != nil && route == MCPPath && !slices.Contains(grant.Scopes, access.ScopeCall) {
			calls, err := mcpCallsTool(c)
			if err != nil {
				d.Handler.Fail(c, err)
				return
			}
			if calls {
				refuseScope(c, d, route, method, grant, access.ScopeCall)
				return
			}
		}
		handlers.SetPrincipal(c, p)
		c.Set("principal_name", p.Name)
		via := models.ViaAPI
		if route == MCPPath {
			via = models.ViaMCP
		}
		a := models.Actor{Principal: p, Via: via, ClientIP: ip}
		if grant != nil {
			a.ClientID, a.KeyLabel, a.Person = grant.ClientID, "oauth:"+grant.ClientID, grant.Person
			c.Set(grantKey, grant)
			if grant.SubjectToken != "" { // for token exchange: invoke takes it from here
				c.Request = c.Request.WithContext(runners.WithSubjectToken(c.Request.Context(), grant.SubjectToken))
			}
		} else {
			a.KeyID, a.KeyLabel = key.ID, cmp.Or(key.Label, key.Prefix)
		}
		setActor(c, a)
		c.Next()
	}
}

// grantKey holds a token's grant on the Gin context (none for a key).
const grantKey = "oauth_grant"

// credentials resolves a bearer secret: an API key (tb_…, or the admin
// key), or an access token one of the verifiers knows, for the resource
// of route. A token comes with its grant; a key with none.
func credentials(c *gin.Context, d Deps, ip, token, route string) (*models.Principal, *models.APIKey, *access.Grant, error) {
	ctx := c.Request.Context()
	if !strings.HasPrefix(token, access.KeyPrefix) {
		g, err := access.VerifyToken(ctx, d.Tokens, token, resourceOf(d, route))
		if err == nil {
			return g.Principal, nil, g, nil
		}
		if !errors.Is(err, access.ErrNotMine) {
			return nil, nil, nil, err
		}
	}
	p, key, err := d.Accounts.Authenticate(ctx, ip, token)
	return p, key, nil, err
}

// identify resolves the Bearer key or token, or the console session a request
// brings, if any, to its principal, on the pages anyone may open that show
// an admin more (the host paths of readiness). A missing or wrong one
// leaves the request anonymous, not refused: a readiness probe has none.
func identify(d Deps) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx := c.Request.Context()
		if token, ok := bearerToken(c.GetHeader("Authorization")); ok {
			if p, _, _, err := credentials(c, d, c.ClientIP(), token, APIPrefix); err == nil {
				handlers.SetPrincipal(c, p)
			}
		} else if token, err := c.Cookie(console.SessionCookie); err == nil {
			if s, err := d.Accounts.ConsoleSession(ctx, token); err == nil {
				handlers.SetPrincipal(c, s.Principal)
			}
		}
		c.Next()
	}
}

// setActor puts who acts on the request's context, with the client's
// address (when a.ClientIP is empty) and the request id, for the audit
// log.
func setActor(c *gin.Context, a models.Actor) {
	// The peer's address, or the client a trusted proxy names, as for key
	// guesses: an X-Forwarded-For from anyone else is whatever the client
	// says.
	if a.ClientIP == "" {
		a.ClientIP = c.ClientIP()
	}
	a.RequestID = c.GetString(handlers.RequestIDKey)
	c.Request = c.Request.WithContext(models.WithActor(c.Request.Context(), a))
}

func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// requestID tags each request with an id (the caller's X-Request-ID when it
// is sane), echoed in the response and in every log line and error body.
func requestID() gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.GetHeader("X-Request-ID")
		if id == "" || !requestIDPattern.MatchString(id) {
			id = newRequestID()
		}
		c.Set(handlers.RequestIDKey, id)
		c.Header("X-Request-ID", id)
		c.Next()
	}
}

// newRequestID is 8 random bytes in hex: one allocation, the string.
func newRequestID() string {
	var b [8]byte
	var h [16]byte
	_, _ = rand.Read(b[:])
	hex.Encode(h[:], b[:])
	return string(h[:])
}

// accessLog writes one structured line per request. It logs the route
// pattern and path, never the query string or headers, which may carry
// secrets.
//
// It also reports each request to the metrics (by route pattern, so
// labels stay bounded).
func accessLog(log *slog.Logger, m *ops.Metrics, line func(RequestLine) bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		end := time.Now() // one clock read for the duration and the line
		took := end.Sub(start)
		m.HTTPRequest(route, c.Request.Method, c.Writer.Status(), took)
		l := RequestLine{End: end, RequestID: c.GetString(handlers.RequestIDKey), Method: c.Request.Method,
			Path: c.Request.URL.Path, Route: c.FullPath(), Actor: c.GetString("principal_name"),
			Status: c.Writer.Status(), Took: took}
		if line != nil && line(l) {
			return
		}
		// Straight to the handler: a request line needs no caller
		// (LogAttrs would walk the stack for one, on every request).
		ctx := c.Request.Context()
		if h := log.Handler(); h.Enabled(ctx, slog.LevelInfo) {
			_ = h.Handle(ctx, l.Record())
		}
	}
}

// Record is the line as a log record.
func (l RequestLine) Record() slog.Record {
	r := slog.NewRecord(l.End, slog.LevelInfo, "request", 0)
	r.AddAttrs(
		slog.String("request_id", l.RequestID),
		slog.String("method", l.Method),
		slog.String("path", l.Path),
		slog.String("route", l.Route),
		slog.Int("status", l.Status),
		slog.Duration("duration", l.Took),
		slog.String("principal", l.Actor),
	)
	return r
}

// recovery turns a panic into a logged 500 with the usual error body.
func recovery(h *handlers.Handler) gin.HandlerFunc {
	return gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, err any) {
		h.Fail(c, fmt.Errorf("panic: %v", err))
	})
}

// securityHeaders sets, on every response, nosniff, no framing, no
// referrer, and the Content-Security-Policy (csp.go), Swagger UI's
// included.
func securityHeaders() gin.HandlerFunc {
	// Canonical names and shared values: set on every response without
	// allocating.
	nosniff, deny, noReferrer, csp := []string{"nosniff"}, []string{"DENY"}, []string{"no-referrer"}, []string{ConsoleCSP}
	return func(c *gin.Context) {
		h := c.Writer.Header()
		h["X-Content-Type-Options"] = nosniff
		h["X-Frame-Options"] = deny
		h["Referrer-Policy"] = noReferrer
		h["Content-Security-Policy"] = csp
		c.Next()
	}
}

// limitBody caps every request body, so no handler can be made to buffer
// more than handlers.MaxBodyBytes.
func limitBody() gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.ContentLength > handlers.MaxBodyBytes {
			c.Header("Connection", "close")
		}
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, handlers.MaxBodyBytes+1)
		c.Next()
	}
}
