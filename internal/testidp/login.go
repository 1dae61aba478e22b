package testidp

import (
	"context"
	"html/template"
	"net/http"
)

// loginPath is the provider's login page: the op sends the browser there
// with ?authRequestID=… and it posts back to itself.
const loginPath = "/login/username"

// loginPage is the form a person (or chromedp, or AccessToken) fills.
var loginPage = template.Must(template.New("login").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Test IdP sign-in</title></head>
<body><main>
<h1>Test IdP sign-in</h1>
<form method="post" action="` + loginPath + `">
<input type="hidden" name="id" value="{{.ID}}">
<label for="username">Username</label> <input id="username" name="username" autocomplete="username">
<label for="password">Password</label> <input id="password" name="password" type="password" autocomplete="current-password">
{{if .Error}}<p role="alert">{{.Error}}</p>{{end}}
<button type="submit">Login</button>
</form>
</main></body></html>`))

// loginForm checks a username and password against the storage and, when
// they match, sends the browser back to the op to finish the request.
type loginForm struct {
	storage  *opStorage
	callback func(ctx context.Context, authRequestID string) string
}

func (l *loginForm) show(w http.ResponseWriter, r *http.Request) {
	render(w, http.StatusOK, r.URL.Query().Get("authRequestID"), "")
}

func (l *loginForm) check(w http.ResponseWriter, r *http.Request) {
	id := r.PostFormValue("id")
	err := l.storage.CheckUsernamePassword(r.PostFormValue("username"), r.PostFormValue("password"), id)
	if err != nil {
		render(w, http.StatusUnauthorized, id, err.Error())
		return
	}
	http.Redirect(w, r, l.callback(r.Context(), id), http.StatusFound)
}

func render(w http.ResponseWriter, status int, id, problem string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = loginPage.Execute(w, struct{ ID, Error string }{id, problem})
}
