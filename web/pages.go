package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"toolbelt/handlers/console"
	"toolbelt/models"
	"toolbelt/views"
)

// ConsolePrefix is where the admin console lives.
const ConsolePrefix = "/admin"

// pages is the console's route table, beside the API's: each page and the
// roles that may open it, enforced by Casbin from the same RolePolicies.
// Sign-in and sign-out are outside it (anyone may try to sign in; anyone
// signed in may sign out).
var pages = []route[*console.Handler]{
	{http.MethodGet, "", everyone, (*console.Handler).Dashboard},

	// Tools: list, detail, register and edit (handlers/console/tools.go).
	{http.MethodGet, "/tools", everyone, (*console.Handler).ToolsPage},
	{http.MethodGet, "/tools/new", admins, (*console.Handler).NewToolPage},
	{http.MethodPost, "/tools/new", admins, (*console.Handler).CreateToolForm},
	{http.MethodGet, "/tools/:name", everyone, (*console.Handler).ToolPage},
	{http.MethodGet, "/tools/:name/edit", admins, (*console.Handler).EditToolPage},
	{http.MethodPost, "/tools/:name/edit", admins, (*console.Handler).PublishToolForm},
	{http.MethodPost, "/tools/:name/rollback", admins, (*console.Handler).RollbackToolForm},
	{http.MethodPost, "/tools/:name/retire", admins, (*console.Handler).RetireToolForm},
	{http.MethodPost, "/playground/feedback", everyone, (*console.Handler).PlaygroundFeedback},
	{http.MethodPost, "/tools/:name/queries/:id/forget", admins, (*console.Handler).ForgetQueryForm},
	{http.MethodPost, "/tools/:name/try", callers, (*console.Handler).TryToolForm},

	// Retrieval playground (handlers/console/playground.go).
	{http.MethodGet, "/playground", everyone, (*console.Handler).Playground},

	// Approvals (handlers/console/approvals.go).
	{http.MethodGet, "/approvals", deciders, (*console.Handler).ApprovalsPage},
	{http.MethodGet, "/approvals/pending", deciders, (*console.Handler).PendingApprovals},
	{http.MethodPost, "/approvals/:id/approve", deciders, (*console.Handler).ApproveInConsole},
	{http.MethodPost, "/approvals/:id/deny", deciders, (*console.Handler).DenyInConsole},

	// Call history (handlers/console/calls.go).
	{http.MethodGet, "/calls", everyone, (*console.Handler).CallsPage},
	{http.MethodGet, "/calls/:id", everyone, (*console.Handler).CallPage},

	// Access: principals, keys, grants (handlers/console/access.go).
	{http.MethodGet, "/access", admins, (*console.Handler).Access},
	{http.MethodPost, "/access/principals", admins, (*console.Handler).CreatePrincipalPage},
	{http.MethodPost, "/access/principals/:id/keys", admins, (*console.Handler).IssueKeyPage},
	{http.MethodPost, "/access/keys/:id/revoke", admins, (*console.Handler).RevokeKeyPage},
	{http.MethodPost, "/access/principals/:id/grants", admins, (*console.Handler).SetGrantsPage},
	{http.MethodPost, "/access/principals/:id/disable", admins, (*console.Handler).DisablePrincipalPage},
	{http.MethodPost, "/access/principals/:id/enable", admins, (*console.Handler).EnablePrincipalPage},
	{http.MethodPost, "/access/principals/:id/delete", admins, (*console.Handler).DeletePrincipalPage},
	{http.MethodPost, "/access/oauth/:id/revoke", admins, (*console.Handler).RevokeOAuthPage},
	{http.MethodPost, "/access/principals/:id/sessions/:session/end", admins, (*console.Handler).EndSessionPage},

	// OAuth consent (handlers/console/consent.go): anyone signed in
	// answers their own authorization requests.
	{http.MethodGet, "/oauth/consent", everyone, (*console.Handler).ConsentPage},
	{http.MethodPost, "/oauth/consent", everyone, (*console.Handler).ConsentForm},

	// The signed-in person's accounts at upstreams that act as each
	// person (handlers/console/connections.go); the OAuth redirect URI,
	// /connections/callback, is outside the table (mountConsole).
	{http.MethodGet, "/connections", everyone, (*console.Handler).ConnectionsPage},
	{http.MethodGet, "/connections/:server/connect", everyone, (*console.Handler).StartConnection},
	{http.MethodGet, "/connections/finish", everyone, (*console.Handler).FinishConnection},
	{http.MethodPost, "/connections/:server/disconnect", everyone, (*console.Handler).DisconnectForm},

	// Upstream MCP servers (handlers/console/servers.go).
	{http.MethodGet, "/servers", admins, (*console.Handler).ServersPage},
	{http.MethodPost, "/servers", admins, (*console.Handler).AddServerForm},
	{http.MethodPost, "/servers/:name/sync", admins, (*console.Handler).SyncServerForm},
	{http.MethodPost, "/servers/:name/disable", admins, (*console.Handler).DisableServerForm},
	{http.MethodPost, "/servers/:name/enable", admins, (*console.Handler).EnableServerForm},
	{http.MethodPost, "/servers/:name/delete", admins, (*console.Handler).DeleteServerForm},
	{http.MethodPost, "/servers/:name/tools/:tool/accept", admins, (*console.Handler).AcceptServerToolForm},
	{http.MethodPost, "/servers/:name/tools/:tool/alias", admins, (*console.Handler).AliasServerToolForm},
	{http.MethodPost, "/servers/:name/tools/:tool/disable", admins, (*console.Handler).DisableServerToolForm},
	{http.MethodPost, "/servers/:name/tools/:tool/enable", admins, (*console.Handler).EnableServerToolForm},

	// Everyone's own secrets (handlers/console/secrets.go).
	{http.MethodGet, "/secrets", everyone, (*console.Handler).SecretsPage},
	{http.MethodPost, "/secrets", everyone, (*console.Handler).SetSecretForm},
	{http.MethodPost, "/secrets/:name/delete", everyone, (*console.Handler).DeleteSecretForm},

	// The audit log (handlers/console/audit.go): admins only, as in the API.
	{http.MethodGet, "/audit", admins, (*console.Handler).AuditPage},
	{http.MethodGet, "/audit/export", admins, (*console.Handler).AuditExport},
}

// navItems are the console's navigation entries; each is shown only to
// roles that may open it.
var navItems = []views.NavItem{
	{Label: "Dashboard", Href: ConsolePrefix},
	{Label: "Tools", Href: ConsolePrefix + "/tools"},
	{Label: "Playground", Href: ConsolePrefix + "/playground"},
	{Label: "Approvals", Href: ConsolePrefix + "/approvals"},
	{Label: "History", Href: ConsolePrefix + "/calls"},
	{Label: "Servers", Href: ConsolePrefix + "/servers"},
	{Label: "Connections", Href: ConsolePrefix + "/connections"},
	{Label: "Access", Href: ConsolePrefix + "/access"},
	{Label: "Audit", Href: ConsolePrefix + "/audit"},
	{Label: "My secrets", Href: ConsolePrefix + "/secrets"},
}

// consoleNotFound answers paths no route matches: inside the console
// with the signed-in frame, elsewhere as usual.
func consoleNotFound(d Deps) gin.HandlerFunc {
	auth := consoleAuth(d)
	return func(c *gin.Context) {
		if p := c.Request.URL.Path; p == ConsolePrefix || strings.HasPrefix(p, ConsolePrefix+"/") {
			auth(c)
			return
		}
		d.Handler.NotFound(c)
	}
}

// mountConsole registers the sign-in pages and the page table.
func mountConsole(r *gin.Engine, d Deps) {
	r.GET(ConsolePrefix+"/login", d.Console.SignInPage)
	r.POST(ConsolePrefix+"/login", d.Console.SignIn)
	// Sign-in through the identity provider (handlers/console/sso.go):
	// open to anyone, as the key form is; each answers 404 when no
	// provider is configured.
	r.GET(ConsolePrefix+"/login/oidc", d.Console.SSOSignIn)
	r.GET(ConsolePrefix+"/login/oidc/callback", d.Console.SSOCallback)
	// An upstream's authorization server sends the browser back here
	// (handlers/console/connections.go): a page that goes on to
	// /connections/finish, where the session's cookie comes along.
	r.GET(ConsolePrefix+"/connections/callback", d.Console.ConnectionsReturn)
	g := r.Group(ConsolePrefix, consoleAuth(d))
	g.POST("/logout", d.Handler.Wrap(d.Console.SignOut))
	for _, p := range pages {
		fn := p.handler
		g.Handle(p.method, p.path, d.Handler.Wrap(func(c *gin.Context) error { return fn(d.Console, c) }))
	}
}

// consoleAuth resolves the session cookie (a browser without one is sent
// to sign in), checks the CSRF token of every request that changes
// something, and asks Casbin whether the role may open the page (a 403
// page when not).
func consoleAuth(d Deps) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx := c.Request.Context()
		token, _ := c.Cookie(console.SessionCookie)
		s, err := d.Accounts.ConsoleSession(ctx, token)
		if errors.Is(err, models.ErrUnauthorized) && c.GetHeader("HX-Request") == "true" {
			// htmx (the approvals list polling): send the whole page to
			// sign in instead of swapping the form into a fragment.
			c.Header("HX-Redirect", ConsolePrefix+"/login")
			c.AbortWithStatus(http.StatusUnauthorized)
			return
		}
		if errors.Is(err, models.ErrUnauthorized) && c.Request.Method == http.MethodGet {
			c.Redirect(http.StatusSeeOther, ConsolePrefix+"/login?next="+url.QueryEscape(c.Request.URL.RequestURI()))
			c.Abort()
			return
		}
		if err != nil {
			d.Handler.Fail(c, err)
			return
		}
		var nav []views.NavItem
		for _, n := range navItems {
			if ok, _ := d.Authz.CanAccess(s.Principal.Role, n.Href, http.MethodGet); ok {
				nav = append(nav, n)
			}
		}
		console.SetConsole(c, s, nav)
		c.Set("principal_name", s.Principal.Name)
		setActor(c, models.Actor{Principal: s.Principal, KeyID: s.KeyID, KeyLabel: s.KeyLabel, Via: models.ViaConsole, Person: s.Person})
		if c.FullPath() == "" { // no such page: a 404 inside the console frame
			d.Handler.NotFound(c)
			return
		}
		if c.Request.Method != http.MethodGet && c.Request.Method != http.MethodHead {
			if err := console.CheckCSRF(c, s); err != nil {
				d.Handler.Fail(c, err)
				return
			}
		}
		if c.FullPath() == ConsolePrefix+"/logout" {
			c.Next()
			return
		}
		allowed, err := d.Authz.CanAccess(s.Principal.Role, c.FullPath(), c.Request.Method)
		if err != nil {
			d.Handler.Fail(c, fmt.Errorf("authorize %s %s: %w", c.Request.Method, c.FullPath(), err))
			return
		}
		if !allowed {
			d.Handler.Fail(c, models.ErrForbidden.Errorf("the %s role may not open this page", s.Principal.Role))
			return
		}
		c.Next()
	}
}
