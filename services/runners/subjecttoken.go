package runners

import "context"

type subjectTokenKey struct{}

// WithSubjectToken returns ctx carrying token as the caller's token for
// token exchange (Call.SubjectToken), "" for none (hiding one ctx had),
// for code that reaches an upstream on a connection shared by a person's
// calls: there the context of each request is what is the call's own,
// and whatever builds the request's credentials (token exchange) reads
// the token from it. The invoker sets it for every run; the web layer on
// each request authenticated with such a token (an admin listing an
// upstream's tools acts as themselves too).
func WithSubjectToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, subjectTokenKey{}, token)
}

// SubjectTokenOf is the token WithSubjectToken put on ctx, or "".
func SubjectTokenOf(ctx context.Context) string {
	s, _ := ctx.Value(subjectTokenKey{}).(string)
	return s
}
