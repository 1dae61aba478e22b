package console

import (
	"crypto/rand"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/a-h/templ"
	"github.com/gin-gonic/gin"

	"toolbelt/handlers"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/views"
)

// Console cookies: the session (HttpOnly, SameSite=Strict) and, before
// signing in, the token the sign-in form must echo.
const (
	SessionCookie    = "tb_session"
	signInCSRFCookie = "tb_signin"
	consoleKey       = "console"
	navKey           = "console_nav"
)

// SetConsole records a request's console session and the navigation its
// role may see (the web layer computes it from the page route table).
func SetConsole(c *gin.Context, s *access.ConsoleSession, nav []views.NavItem) {
	c.Set(consoleKey, s)
	c.Set(navKey, nav)
	handlers.SetPrincipal(c, s.Principal)
}

// CurrentConsole returns the request's console session, or nil.
func CurrentConsole(c *gin.Context) *access.ConsoleSession {
	v, _ := c.Get(consoleKey)
	s, _ := v.(*access.ConsoleSession)
	return s
}

// Page is the frame data of a console page titled title.
func (h *Handler) Page(c *gin.Context, title string) views.Page {
	p := views.Page{Title: title, Notice: takeNotice(c)}
	if s := CurrentConsole(c); s != nil {
		p.User, p.Role, p.CSRF = s.Principal.Name, s.Principal.Role, s.CSRF
	}
	nav, _ := c.Get(navKey)
	items, _ := nav.([]views.NavItem)
	for _, n := range items {
		n.Active = n.Href == c.Request.URL.Path || (n.Href != "/admin" && strings.HasPrefix(c.Request.URL.Path, n.Href+"/"))
		p.Nav = append(p.Nav, n)
	}
	return p
}

// Render writes a page with a status.
func (h *Handler) Render(c *gin.Context, status int, page templ.Component) error {
	c.Header("Content-Type", "text/html; charset=utf-8")
	c.Header("Cache-Control", "no-store")
	c.Status(status)
	if err := page.Render(c.Request.Context(), c.Writer); err != nil {
		h.Log.ErrorContext(c.Request.Context(), "render page", "err", err, "path", c.Request.URL.Path)
	}
	return nil
}

// Redirect sends the browser to a console path after a form, with an
// optional notice shown on arrival (in a flash cookie: notice.go).
func Redirect(c *gin.Context, path, notice string) error {
	setNotice(c, notice)
	if c.GetHeader("HX-Request") == "true" {
		c.Header("HX-Redirect", path)
		c.Status(http.StatusNoContent)
		return nil
	}
	c.Redirect(http.StatusSeeOther, path)
	return nil
}

// CheckCSRF verifies a console form or htmx request carries the session's
// CSRF token (form field _csrf or header X-CSRF-Token).
func CheckCSRF(c *gin.Context, s *access.ConsoleSession) error {
	got := c.GetHeader("X-CSRF-Token")
	if got == "" {
		got = c.PostForm("_csrf")
	}
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.CSRF)) != 1 {
		return models.ErrForbidden.Errorf("the form's security token is missing or out of date; reload the page and try again")
	}
	return nil
}

// SignInPage shows the sign-in form.
func (h *Handler) SignInPage(c *gin.Context) {
	next := safeNext(c.Query("next"))
	if tok, err := c.Cookie(SessionCookie); err == nil {
		if s, err := h.Accounts.ConsoleSession(c.Request.Context(), tok); err == nil {
			c.Redirect(http.StatusSeeOther, landing(next, s.Principal))
			return
		}
	}
	_ = h.Render(c, http.StatusOK, views.SignIn(h.signInData(c, next, "")))
}

// SignIn checks the key of the sign-in form and opens a session.
func (h *Handler) SignIn(c *gin.Context) {
	next := safeNext(c.PostForm("next"))
	if h.KeySignInOff {
		h.signInFailed(c, handlers.StatusFor(models.CodeForbidden), next,
			"Signing in with an API key is switched off on this server (TOOLBELT_KEY_SIGNIN=off); sign in through the identity provider. API keys still work on the API.")
		return
	}
	want, _ := c.Cookie(signInCSRFCookie)
	got := c.PostForm("_csrf")
	if want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		h.signInFailed(c, handlers.StatusFor(models.CodeForbidden), next, "The sign-in form expired; enter your key again.")
		return
	}
	key := strings.TrimSpace(c.PostForm("key"))
	if key == "" {
		h.signInFailed(c, handlers.StatusFor(models.CodeValidation), next, "Enter an API key.")
		return
	}
	ctx := models.WithActor(c.Request.Context(), models.Actor{Via: models.ViaConsole, RequestID: c.GetString(handlers.RequestIDKey)})
	s, err := h.Accounts.SignIn(ctx, c.ClientIP(), key) // see web.Deps.TrustedProxies
	if err != nil {
		status, body := handlers.Classify(c, h.Log, err)
		h.signInFailed(c, status, next, body.Error.Message)
		return
	}
	setConsoleCookie(c, signInCSRFCookie, "", -1)
	setConsoleCookie(c, SessionCookie, s.Token, int(access.ConsoleSessionTTL.Seconds()))
	c.Redirect(http.StatusSeeOther, landing(next, s.Principal))
}

// landing is where a sign-in leads when it names nowhere else (next is
// the console's home): a reviewer's work is the approvals queue.
func landing(next string, p *models.Principal) string {
	if next == "/admin" && p != nil && p.Role == access.RoleReviewer {
		return "/admin/approvals"
	}
	return next
}

// SignOut ends the console session.
func (h *Handler) SignOut(c *gin.Context) error {
	if s := CurrentConsole(c); s != nil {
		if err := h.Accounts.SignOut(c.Request.Context(), s.Token); err != nil {
			return err
		}
	}
	setConsoleCookie(c, SessionCookie, "", -1)
	c.Redirect(http.StatusSeeOther, "/admin/login")
	return nil
}

// signInToken returns the sign-in form's CSRF token, setting its cookie.
func (h *Handler) signInToken(c *gin.Context) string {
	if tok, err := c.Cookie(signInCSRFCookie); err == nil && len(tok) == 26 {
		return tok
	}
	tok := rand.Text()
	setConsoleCookie(c, signInCSRFCookie, tok, 3600)
	return tok
}

// setConsoleCookie sets an HttpOnly, SameSite=Strict cookie for /admin
// (Secure behind TLS); maxAge -1 deletes it.
func setConsoleCookie(c *gin.Context, name, value string, maxAge int) {
	secure := c.Request.TLS != nil || strings.EqualFold(c.GetHeader("X-Forwarded-Proto"), "https")
	http.SetCookie(c.Writer, &http.Cookie{Name: name, Value: value, Path: "/admin", MaxAge: maxAge,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
}

// safeNext keeps a post-sign-in destination inside the console: a
// same-origin relative path under /admin (an OAuth consent page, a page
// the session ended on). Anything a browser could read as another origin
// ("//evil", "/\evil", "https://evil", their percent-encoded and
// control-character forms) is refused, and the console's home is used.
func safeNext(next string) string {
	const home = "/admin"
	u, err := url.Parse(next)
	if next == "" || err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return home
	}
	path, _, _ := strings.Cut(next, "?")
	lower := strings.ToLower(path)
	if (path != home && !strings.HasPrefix(path, home+"/")) || strings.HasPrefix(path, "/admin/login") ||
		strings.Contains(path, "//") || strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c") || strings.Contains(lower, "%2e") {
		return home
	}
	for _, r := range next {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return home
		}
	}
	return next
}

// ErrorPage renders an error for a browser (handlers.Handler.ErrorPage).
func (h *Handler) ErrorPage(c *gin.Context, status int, body handlers.ErrorBody) {
	s := CurrentConsole(c)
	p := h.Page(c, fmt.Sprintf("%d %s", status, http.StatusText(status)))
	_ = h.Render(c, status, views.ErrorPage(p, views.ErrorView{Status: status, Code: body.Error.Code,
		Message: body.Error.Message, RequestID: body.Error.RequestID, SignedIn: s != nil}))
	c.Abort()
}
