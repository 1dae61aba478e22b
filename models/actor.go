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
}

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
