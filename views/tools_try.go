package views

// trySessionDescribedBy names the session field's hint and, when it has one,
// its error.
func trySessionDescribedBy(bad bool) string {
	if bad {
		return "try-session-error try-session-hint"
	}
	return "try-session-hint"
}
