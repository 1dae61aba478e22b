package models

// ActorName names who did something: the principal, or "system" for
// what the server did on its own.
func ActorName(p *Principal) string {
	if p == nil {
		return "system"
	}
	return p.Name
}
