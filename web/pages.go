package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"toolbelt/handlers"
	"toolbelt/models"
	"toolbelt/views"
)

// ConsolePrefix is where the admin console lives.
const ConsolePrefix = "/admin"

// pages is the console's route table, beside the API's: each page and the
// roles that may open it, enforced by Casbin from the same RolePolicies.
// Sign-in and sign-out are outside it (anyone may try to sign in; anyone
// signed in may sign out).
var pages = []route{
	{http.MethodGet, "", everyone, (*handlers.Handler).Dashboard},

	// Tools: list, detail, register and edit (handlers/console_tools.go).
	{http.MethodGet, "/tools", everyone, (*handlers.Handler).ToolsPage},
	{http.MethodGet, "/tools/new", admins, (*handlers.Handler).NewToolPage},
	{http.MethodPost, "/tools/new", admins, (*handlers.Handler).CreateToolForm},
	{http.MethodGet, "/tools/:name", everyone, (*handlers.Handler).ToolPage},
	{http.MethodGet, "/tools/:name/edit", admins, (*handlers.Handler).EditToolPage},
	{http.MethodPost, "/tools/:name/edit", admins, (*handlers.Handler).PublishToolForm},
	{http.MethodPost, "/tools/:name/rollback", admins, (*handlers.Handler).RollbackToolForm},
	{http.MethodPost, "/tools/:name/retire", admins, (*handlers.Handler).RetireToolForm},
	{http.MethodPost, "/playground/feedback", everyone, (*handlers.Handler).PlaygroundFeedback},
	{http.MethodPost, "/tools/:name/queries/:id/forget", admins, (*handlers.Handler).ForgetQueryForm},
	{http.MethodPost, "/tools/:name/try", callers, (*handlers.Handler).TryToolForm},

	// Retrieval playground (handlers/console_playground.go).
	{http.MethodGet, "/playground", everyone, (*handlers.Handler).Playground},

	// Approvals (handlers/console_approvals.go).
	{http.MethodGet, "/approvals", deciders, (*handlers.Handler).ApprovalsPage},
	{http.MethodGet, "/approvals/pending", deciders, (*handlers.Handler).PendingApprovals},
	{http.MethodPost, "/approvals/:id/approve", deciders, (*handlers.Handler).ApproveInConsole},
	{http.MethodPost, "/approvals/:id/deny", deciders, (*handlers.Handler).DenyInConsole},

	// Call history (handlers/console_calls.go).
	{http.MethodGet, "/calls", everyone, (*handlers.Handler).CallsPage},
	{http.MethodGet, "/calls/:id", everyone, (*handlers.Handler).CallPage},

	// Access: principals, keys, grants (handlers/console_access.go).
	{http.MethodGet, "/access", admins, (*handlers.Handler).Access},
	{http.MethodPost, "/access/principals", admins, (*handlers.Handler).CreatePrincipalPage},
	{http.MethodPost, "/access/principals/:id/keys", admins, (*handlers.Handler).IssueKeyPage},
	{http.MethodPost, "/access/keys/:id/revoke", admins, (*handlers.Handler).RevokeKeyPage},
	{http.MethodPost, "/access/principals/:id/grants", admins, (*handlers.Handler).SetGrantsPage},
	{http.MethodPost, "/access/principals/:id/disable", admins, (*handlers.Handler).DisablePrincipalPage},
	{http.MethodPost, "/access/principals/:id/enable", admins, (*handlers.Handler).EnablePrincipalPage},
	{http.MethodPost, "/access/principals/:id/delete", admins, (*handlers.Handler).DeletePrincipalPage},

	// The audit log (handlers/console_audit.go): admins only, as in the API.
	{http.MethodGet, "/audit", admins, (*handlers.Handler).AuditPage},
	{http.MethodGet, "/audit/export", admins, (*handlers.Handler).AuditExport},
}

// navItems are the console's navigation entries; each is shown only to
// roles that may open it.
var navItems = []views.NavItem{
	{Label: "Dashboard", Href: ConsolePrefix},
	{Label: "Tools", Href: ConsolePrefix + "/tools"},
	{Label: "Playground", Href: ConsolePrefix + "/playground"},
	{Label: "Approvals", Href: ConsolePrefix + "/approvals"},
	{Label: "History", Href: ConsolePrefix + "/calls"},
	{Label: "Access", Href: ConsolePrefix + "/access"},
	{Label: "Audit", Href: ConsolePrefix + "/audit"},
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
	r.GET(ConsolePrefix+"/login", d.Handler.SignInPage)
	r.POST(ConsolePrefix+"/login", d.Handler.SignIn)
	g := r.Group(ConsolePrefix, consoleAuth(d))
	g.POST("/logout", d.Handler.Wrap(d.Handler.SignOut))
	for _, p := range pages {
		fn := p.handler
		g.Handle(p.method, p.path, d.Handler.Wrap(func(c *gin.Context) error { return fn(d.Handler, c) }))
	}
}

// consoleAuth resolves the session cookie (a browser without one is sent
// to sign in), checks the CSRF token of every request that changes
// something, and asks Casbin whether the role may open the page (a 403
// page when not).
func consoleAuth(d Deps) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx := c.Request.Context()
		token, _ := c.Cookie(handlers.SessionCookie)
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
		handlers.SetConsole(c, s, nav)
		c.Set("principal_name", s.Principal.Name)
		setActor(c, models.Actor{Principal: s.Principal, KeyID: s.KeyID, KeyLabel: s.KeyLabel, Via: models.ViaConsole})
		if c.FullPath() == "" { // no such page: a 404 inside the console frame
			d.Handler.NotFound(c)
			return
		}
		if c.Request.Method != http.MethodGet && c.Request.Method != http.MethodHead {
			if err := handlers.CheckCSRF(c, s); err != nil {
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
