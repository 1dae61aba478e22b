package models

import "context"

// ActorName names who did something: the principal, or "system" for
// what the server did on its own.
func ActorName(p *Principal) string {
	if p == nil {
		return "system"
	}
	return p.Name
}

// Actor is who makes a request and from where, as the audit log records
// it: the principal, the key it authenticated with (its id and label, or
// prefix; never the secret), the door (api, console, mcp) and the client's
// address. The web layer puts it on the request's context.
type Actor struct {
	Principal *Principal
	KeyID     uint
	KeyLabel  string
	Via       string
	ClientIP  string
	RequestID string
	// ClientID is the OAuth client whose access token the request
	// brought (KeyID is 0 then); empty for a key.
	ClientID string
	// Person names the individual behind Principal when an identity
	// provider vouched for them (a console session signed in through
	// SSO): PersonName of their identity. Empty for keys, which name a
	// credential, not a person.
	Person string
}

// SignedInSSO is how a door reads when the actor signed in through the
// organisation's identity provider (Door).
const SignedInSSO = "sso"

// Door is the way the actor came in, as approvals record it: the door
// (api, console, mcp), followed by "sso" when an identity provider
// vouched for the person ("console sso").
func (a Actor) Door() string {
	if a.Person != "" {
		return a.Via + " " + SignedInSSO
	}
	return a.Via
}

// PersonName is how the audit log and approvals name a person an
// identity provider signed in: their name and email as the provider
// gave them, and the subject and issuer that identify them for certain
// (names and emails can change; the subject at its issuer does not).
func PersonName(name, email, subject, issuer string) string {
	who := name
	switch {
	case who == "" && email == "":
		who = subject
	case who == "":
		who = "<" + email + ">"
	case email != "":
		who += " <" + email + ">"
	}
	return clip(who+", "+SignedInSSO+" subject "+subject+" at "+issuer, PersonMax)
}

// PersonMax is the longest a recorded person's name is kept.
const PersonMax = 300

// The doors an actor comes through.
const (
	ViaAPI     = "api"
	ViaConsole = "console"
	ViaMCP     = "mcp"
	ViaSystem  = "system"
)

type actorKey struct{}

// WithActor returns ctx carrying who acts.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorOf is the actor ctx carries; without one, the server itself. An
// actor with no principal at one of the doors is someone not (yet)
// known: a console sign-in, say, whose address the audit log keeps.
func ActorOf(ctx context.Context) Actor {
	if a, ok := ctx.Value(actorKey{}).(Actor); ok && (a.Principal != nil || a.Via != "" && a.Via != ViaSystem) {
		return a
	}
	return Actor{Via: ViaSystem}
}

// Anonymous is the audit log's actor for someone at a door who is not a
// principal (a wrong key at the console's sign-in).
const Anonymous = "anonymous"

// Name is how the audit log names the actor.
func (a Actor) Name() string {
	if a.Principal == nil && a.Via != ViaSystem {
		return Anonymous
	}
	return ActorName(a.Principal)
}
