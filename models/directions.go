package models

import "context"

// Directions name, in the terms of the transport a call came through, the
// steps a suggestion can point an agent to: finding the tools for its task,
// and fetching a call's result later. The invoker words its suggestions
// with the directions of the call's context, so the agent reads the means
// it has (the REST API's endpoints, or the MCP server's tools) and no
// transport rewrites another's sentences.
type Directions interface {
	// SearchTools names the way to find the tools that fit a task.
	SearchTools() string
	// PollCall is the imperative that fetches a call's result later.
	PollCall(callID string) string
}

type directionsKey struct{}

// WithDirections returns ctx carrying d to the calls made with it.
func WithDirections(ctx context.Context, d Directions) context.Context {
	return context.WithValue(ctx, directionsKey{}, d)
}

// DirectionsOf is the directions ctx carries: the REST API's unless a
// transport set its own, since every agent can reach the API.
func DirectionsOf(ctx context.Context) Directions {
	if d, ok := ctx.Value(directionsKey{}).(Directions); ok && d != nil {
		return d
	}
	return restDirections{}
}

// restDirections name the REST API's endpoints.
type restDirections struct{}

func (restDirections) SearchTools() string { return "POST /api/v1/tools/select" }

func (restDirections) PollCall(callID string) string { return "Poll GET /api/v1/calls/" + callID }
