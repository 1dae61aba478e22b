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

// ActorOf is the actor ctx carries; without one, the server itself.
func ActorOf(ctx context.Context) Actor {
	if a, ok := ctx.Value(actorKey{}).(Actor); ok && a.Principal != nil {
		return a
	}
	return Actor{Via: ViaSystem}
}
