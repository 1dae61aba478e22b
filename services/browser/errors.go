package browser

import (
	"context"
	"errors"
	"fmt"
)

// Kind classifies a failed navigation, so that the tool runner can word the
// result for the agent without parsing messages.
type Kind string

// The kinds of Error.
const (
	// KindBlocked means that Allow refused the URL, the main document or one of
	// its redirect hops.
	KindBlocked Kind = "blocked"
	// KindTimeout means that the deadline of the context passed first.
	KindTimeout Kind = "timeout"
	// KindCanceled means that the context was canceled.
	KindCanceled Kind = "canceled"
	// KindNavigation means that the page could not be loaded: an invalid URL, a
	// scheme other than http and https, a DNS failure, a refused connection.
	KindNavigation Kind = "navigation"
	// KindUnavailable means that Chromium cannot start or died during the call.
	KindUnavailable Kind = "unavailable"
	// KindInvalid means that the Options are unusable, such as a relative
	// ScreenshotPath.
	KindInvalid Kind = "invalid"
	// KindInternal means that reading the loaded page or writing the
	// screenshot failed.
	KindInternal Kind = "internal"
)

// Error is the error of Navigate. Msg is safe to show to the agent; Err keeps
// the underlying cause for the server log and for errors.Is.
type Error struct {
	Kind Kind
	Msg  string
	Err  error
}

// Error returns the kind, the message and the cause, for logs.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("browser %s: %s: %v", e.Kind, e.Msg, e.Err)
	}
	return fmt.Sprintf("browser %s: %s", e.Kind, e.Msg)
}

// Unwrap returns the cause, so that errors.Is finds context.DeadlineExceeded.
func (e *Error) Unwrap() error { return e.Err }

// IsKind reports whether err is an *Error of the kind k.
func IsKind(err error, k Kind) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == k
}

// contextError turns the end of ctx into a KindTimeout or KindCanceled error
// that says what was going on.
func contextError(ctx context.Context, doing string) *Error {
	err := context.Cause(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Kind: KindTimeout, Msg: "deadline exceeded while " + doing, Err: err}
	}
	return &Error{Kind: KindCanceled, Msg: "canceled while " + doing, Err: err}
}
