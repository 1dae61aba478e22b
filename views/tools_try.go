package views

// sessionDescribedBy names the session field's hint and, when it has one,
// its error.
func sessionDescribedBy(bad bool) string {
	if bad {
		return "try-session-error try-session-hint"
	}
	return "try-session-hint"
}
