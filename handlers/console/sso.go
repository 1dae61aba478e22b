package console

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"toolbelt/handlers"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/identity"
	"toolbelt/views"
)

// ssoCookiePath scopes the cookie that carries a sign-in's PKCE verifier
// to the two SSO routes.
const ssoCookiePath = "/admin/login/oidc"

// SSOSignIn sends the browser to the identity provider
// (GET /admin/login/oidc?next=…).
func (h *Handler) SSOSignIn(c *gin.Context) {
	next := safeNext(c.Query("next"))
	if h.SSO == nil {
		h.signInFailed(c, http.StatusNotFound, next, "This server does not sign in through an identity provider.")
		return
	}
	d, err := h.SSO.Start(c.Request.Context(), next)
	if err != nil {
		status, body := handlers.Classify(c, h.Log, err)
		h.signInFailed(c, status, next, body.Error.Message)
		return
	}
	// Lax, not Strict: the provider's redirect back is a navigation from
	// its site, and must carry the verifier.
	secure := c.Request.TLS != nil || strings.EqualFold(c.GetHeader("X-Forwarded-Proto"), "https")
	http.SetCookie(c.Writer, &http.Cookie{Name: ssoCookie(d.State), Value: d.Verifier, Path: ssoCookiePath,
		MaxAge: int(identity.SignInTTL.Seconds()), HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
	c.Header("Cache-Control", "no-store")
	c.Redirect(http.StatusSeeOther, d.URL)
}

// SSOCallback finishes a sign-in the provider sent back
// (GET /admin/login/oidc/callback?state=…&code=…) and opens the session.
func (h *Handler) SSOCallback(c *gin.Context) {
	if h.SSO == nil {
		h.signInFailed(c, http.StatusNotFound, "/admin", "This server does not sign in through an identity provider.")
		return
	}
	state := c.Query("state")
	verifier, _ := c.Cookie(ssoCookie(state))
	if state != "" {
		http.SetCookie(c.Writer, &http.Cookie{Name: ssoCookie(state), Path: ssoCookiePath, MaxAge: -1, HttpOnly: true})
	}
	ctx := models.WithActor(c.Request.Context(), models.Actor{Via: models.ViaConsole, RequestID: c.GetString(handlers.RequestIDKey)})
	s, next, err := h.SSO.Finish(ctx, identity.Return{State: state, Code: c.Query("code"), Error: c.Query("error"),
		ErrorDescription: c.Query("error_description"), Verifier: verifier, Client: c.ClientIP()})
	if err != nil {
		status, body := handlers.Classify(c, h.Log, err)
		h.signInFailed(c, status, "/admin", body.Error.Message)
		return
	}
	setConsoleCookie(c, SessionCookie, s.Token, int(access.ConsoleSessionTTL.Seconds()))
	_ = h.Render(c, http.StatusOK, views.SignedIn(landing(safeNext(next), s.Principal)))
}

// signInFailed shows the sign-in page with what went wrong.
func (h *Handler) signInFailed(c *gin.Context, status int, next, msg string) {
	_ = h.Render(c, status, views.SignIn(h.signInData(c, next, msg)))
}

// signInData is the sign-in page's data: the form's token (none when key
// sign-in is off), the provider's name when SSO is on.
func (h *Handler) signInData(c *gin.Context, next, msg string) views.SignInData {
	d := views.SignInData{Next: next, Error: msg, KeysOff: h.KeySignInOff}
	if !h.KeySignInOff {
		d.CSRF = h.signInToken(c)
	}
	if h.SSO != nil {
		d.SSO = h.SSO.Name()
	}
	return d
}

// ssoCookie names the cookie of one pending sign-in (by a digest of its
// state, so two tabs signing in at once keep their own).
func ssoCookie(state string) string {
	sum := sha256.Sum256([]byte(state))
	return "tb_oidc_" + hex.EncodeToString(sum[:6])
}
