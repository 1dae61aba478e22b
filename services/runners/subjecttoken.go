package runners

import "context"

type subjectTokenKey struct{}

// WithSubjectToken returns ctx carrying a call's Call.SubjectToken, for
// code that reaches an upstream on a connection shared by a person's
// calls: there the context of each request is what is the call's own,
// and whatever builds the request's credentials (token exchange) reads
// the token from it. Never put a context carrying it where it outlives
// the call (a connection's or a background job's).
func WithSubjectToken(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	return context.WithValue(ctx, subjectTokenKey{}, token)
}

// SubjectTokenOf is the token WithSubjectToken put on ctx, or "".
func SubjectTokenOf(ctx context.Context) string {
	s, _ := ctx.Value(subjectTokenKey{}).(string)
	return s
}
