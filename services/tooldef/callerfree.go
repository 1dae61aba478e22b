package tooldef

import "strings"

// CallerFree reports whether a call's result depends only on the tool
// version and the call's arguments, never on who calls or in which
// session: only then may one caller's cached result answer another's
// identical call. Everything else is kept per principal and session.
//
// Only an http tool qualifies, and only while its URL and body are filled
// from the arguments alone and its headers from the arguments and the
// server's configured secrets ({{env.NAME}}, the same for every caller):
// it runs nothing in the caller's work directory and sends nothing of the
// caller's. Builtins and command tools read and run in the session's work
// directory (a file, a program's output, a browser's pages); a composite's
// steps and an mcp tool's upstream run as the caller; and a template
// naming anything but an argument or {{env.NAME}} (a dotted name of any
// other kind, such as {{user.secret.NAME}}) carries the caller's own
// values.
func CallerFree(def Definition) bool {
	r := def.Runner
	if r.Kind != RunnerHTTP || !onlyArguments(r.URL, false) || !onlyArguments(r.Body, false) {
		return false
	}
	for _, v := range r.Headers {
		if !onlyArguments(v, true) {
			return false
		}
	}
	return true
}

// onlyArguments reports whether every placeholder of a template names an
// argument, or, where secrets are allowed, a configured secret.
func onlyArguments(tmpl string, secrets bool) bool {
	for _, m := range Placeholder.FindAllStringSubmatch(tmpl, -1) {
		if strings.Contains(m[1], ".") && !(secrets && envRefPattern.MatchString(m[1])) {
			return false
		}
	}
	return true
}

// UserSecret returns NAME when a placeholder's name is user.secret.NAME:
// the secret the person a call acts for stored for themselves. Such a
// template is never CallerFree.
func UserSecret(placeholder string) (string, bool) {
	m := userSecretRef.FindStringSubmatch(placeholder)
	if m == nil {
		return "", false
	}
	return m[1], true
}
