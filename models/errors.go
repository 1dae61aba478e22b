package models

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mattn/go-sqlite3"
)

// The error codes: every answer that is not a success names one of these,
// whether it is an API error (handlers.ErrorBody), a tool call's ToolResult
// or an MCP isError result. This file is the whole vocabulary; handlers
// holds the one table from code to HTTP status, and its test fails for a
// code without a status.
const (
	// CodeInvalidRequest is a request the API cannot read: malformed JSON,
	// an unknown field or query parameter, a value out of range (ErrInvalid).
	CodeInvalidRequest = "INVALID_REQUEST"
	// CodeUnauthorized is a request without a valid API key or console
	// session (ErrUnauthorized).
	CodeUnauthorized = "UNAUTHORIZED"
	// CodeForbidden is a request the caller's role may not make, or a
	// reviewer deciding their own call (ErrForbidden).
	CodeForbidden = "FORBIDDEN"
	// CodeNotFound is an unknown tool, version, principal, key, call,
	// approval or route (ErrNotFound).
	CodeNotFound = "NOT_FOUND"
	// CodeConflict is a request that contradicts what is stored: a name
	// taken, the last admin key, an approval already decided (ErrConflict).
	CodeConflict = "CONFLICT"
	// CodeMethodNotAllowed is a known path asked with another method.
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	// CodePayloadTooLarge is a request body over the API's limit.
	CodePayloadTooLarge = "PAYLOAD_TOO_LARGE"
	// CodeUnsupportedMediaType is a request body not sent as UTF-8 JSON.
	CodeUnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE"

	// CodeValidation is a well-formed input that breaks the rules, each
	// problem located by a JSON pointer: a request body (ValidationError),
	// or a call's arguments against the tool's parameters schema.
	CodeValidation = "VALIDATION_ERROR"
	// CodeRateLimit is a limit reached: calls of a tool by one principal,
	// or wrong API keys from one address (ErrRateLimited); the answer says
	// how long to wait.
	CodeRateLimit = "RATE_LIMIT_EXCEEDED"
	// CodeInternal is a server fault. An API answer says only "internal
	// error"; the log has the detail.
	CodeInternal = "INTERNAL"
	// CodeStorageFull is a write refused because a disk is full: the
	// database's (SQLite's SQLITE_FULL, Postgres' disk_full) or the data
	// directory's (ENOSPC: the call journal, a session's work directory).
	// The message names which (FullDisk); nothing about the caller's
	// request was wrong, and it may succeed once space is freed.
	CodeStorageFull = "STORAGE_FULL"
	// CodeUnavailable is a request the database could not serve because
	// it does not answer (restarting, unreachable, shutting down), or a
	// call the server stopped before its tool began: nothing was done,
	// and it may succeed in a few seconds.
	CodeUnavailable = "UNAVAILABLE"

	// CodeToolNotFound is a call of a tool (or version) that does not
	// exist; the suggestion names the closest tools the caller may use.
	CodeToolNotFound = "TOOL_NOT_FOUND"
	// CodePermissionDenied is a call of a tool the caller's role and
	// grants do not allow.
	CodePermissionDenied = "PERMISSION_DENIED"
	// CodeConfirmationRequired is a call that waits for a reviewer's
	// approval, or whose approval does not match it.
	CodeConfirmationRequired = "CONFIRMATION_REQUIRED"
	// CodeConfirmationDenied ends a call a reviewer denied or let expire;
	// the suggestion carries the reviewer's reason.
	CodeConfirmationDenied = "CONFIRMATION_DENIED"
	// CodePathNotAllowed is a path argument outside the session's work
	// directory.
	CodePathNotAllowed = "PATH_NOT_ALLOWED"
	// CodeCommandRejected is a shell command that is not one plain command.
	CodeCommandRejected = "COMMAND_REJECTED"
	// CodeURLNotAllowed is a URL the server will not fetch (internal
	// addresses, schemes other than http and https).
	CodeURLNotAllowed = "URL_NOT_ALLOWED"
	// CodeQueueFull is a call refused because its category's queue is
	// full; the answer says how long to wait.
	CodeQueueFull = "QUEUE_FULL"
	// CodeTimeout ends a call whose tool did not finish within its timeout.
	CodeTimeout = "TIMEOUT"
	// CodeCancelled ends a call cancelled while it waited or ran.
	CodeCancelled = "CANCELLED"
	// CodeUpstream ends a call whose tool's remote service failed or
	// did not answer.
	CodeUpstream = "UPSTREAM_ERROR"
	// CodeUpstreamNotConnected ends a call of a tool that acts as the
	// person at an upstream (their connected account, or a secret they
	// store for themselves) when the person has none: nothing ran, and
	// the error names the console page that connects it.
	CodeUpstreamNotConnected = "UPSTREAM_NOT_CONNECTED"
	// CodeExecutionFailed ends a call whose tool ran and failed.
	CodeExecutionFailed = "EXECUTION_FAILED"
	// CodeSandboxUnavailable ends a call of a sandboxed tool on a server
	// without a working sandbox.
	CodeSandboxUnavailable = "SANDBOX_UNAVAILABLE"
	// CodeSandboxLimit ends a call that reached a limit of its sandbox
	// (memory, processes, output, the work directory's quota).
	CodeSandboxLimit = "SANDBOX_LIMIT"
)

// Kind is a sentinel error of the vocabulary, tied to the code an error of
// its kind answers with. Every layer returns one with what went wrong,
// ErrNotFound.Errorf("tool %q", name), and errors.Is finds it under any
// wrapping.
type Kind struct {
	code string
	text string
}

// NewKind returns a sentinel answering with code: the HTTP layer's own
// refusals (a body too large, a method not allowed) are kinds too.
func NewKind(code, text string) *Kind { return &Kind{code: code, text: text} }

func (k *Kind) Error() string { return k.text }

// Code is the code an error of this kind answers with.
func (k *Kind) Code() string { return k.code }

// Errorf returns an error of this kind saying what went wrong:
// ErrNotFound.Errorf("tool %q", name) reads `not found: tool "x"`, as
// fmt.Errorf("%w: tool %q", ErrNotFound, name) would, but keeps the
// detail apart from the kind for a person reading it (Detail). A %w in
// format wraps as in fmt.Errorf.
func (k *Kind) Errorf(format string, args ...any) error {
	return &kindError{kind: k, detail: fmt.Errorf(format, args...)}
}

// kindError is an error of a kind with its detail.
type kindError struct {
	kind   *Kind
	detail error
}

func (e *kindError) Error() string { return e.kind.text + ": " + e.detail.Error() }

func (e *kindError) Unwrap() []error { return []error{e.kind, e.detail} }

// Detail is what err says to a person: the detail of the kind it carries,
// without the kind or the context wrapped around it ("revoke api key 1:
// conflict: key 1 is the last active admin key" says "key 1 is the last
// active admin key"), or its whole message when it carries no detail.
func Detail(err error) string {
	var e *kindError
	if errors.As(err, &e) {
		return e.detail.Error()
	}
	return err.Error()
}

// The kinds every layer returns.
var (
	ErrInvalid      = NewKind(CodeInvalidRequest, "invalid input")
	ErrUnauthorized = NewKind(CodeUnauthorized, "unauthorized")
	ErrForbidden    = NewKind(CodeForbidden, "forbidden")
	ErrNotFound     = NewKind(CodeNotFound, "not found")
	ErrConflict     = NewKind(CodeConflict, "conflict")
	ErrRateLimited  = NewKind(CodeRateLimit, "too many requests")
	ErrQueueFull    = NewKind(CodeQueueFull, "queue full")
)

// kinds are the sentinels CodeOf tries for errors that match one through
// an Is method rather than by wrapping it, in this order.
var kinds = []*Kind{ErrInvalid, ErrUnauthorized, ErrForbidden, ErrNotFound, ErrRateLimited, ErrConflict}

// CodeOf is the code err answers with: CodeValidation for a
// ValidationError, the code of the kind it wraps or matches, and
// CodeInternal for anything else (a fault, not the caller's); "" for nil.
func CodeOf(err error) string {
	if err == nil {
		return ""
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		return CodeValidation
	}
	var k *Kind
	if errors.As(err, &k) {
		return k.code
	}
	for _, k := range kinds {
		if errors.Is(err, k) {
			return k.code
		}
	}
	if FullDisk(err) != "" {
		return CodeStorageFull
	}
	if Unavailable(err) {
		return CodeUnavailable
	}
	return CodeInternal
}

// Unavailable reports whether err says the database does not answer: a
// connection refused, cut or reset, or Postgres shutting down, starting
// up or refusing connections (SQLSTATE classes 08 and 57P).
func Unavailable(err error) bool {
	var pg *pgconn.PgError
	var connect *pgconn.ConnectError
	var op *net.OpError
	switch {
	case err == nil:
		return false
	case errors.As(err, &pg):
		return strings.HasPrefix(pg.Code, "08") || strings.HasPrefix(pg.Code, "57P")
	case errors.As(err, &connect), errors.As(err, &op), errors.Is(err, driver.ErrBadConn),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		return true
	}
	return pgconn.SafeToRetry(err)
}

// postgresDiskFull is Postgres' SQLSTATE disk_full.
const postgresDiskFull = "53100"

// FullDisk names the disk err says is full, for an answer to tell an
// operator which to free: SQLite's SQLITE_FULL (or an I/O error whose
// cause is ENOSPC), Postgres' disk_full, or ENOSPC from a file the server
// writes (the call journal, a session's work directory); "" when err
// says no disk is full.
func FullDisk(err error) string {
	var lite sqlite3.Error
	var pg *pgconn.PgError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &lite) && (lite.Code == sqlite3.ErrFull || lite.SystemErrno == syscall.ENOSPC):
		return "the disk of the SQLite database (in the data directory)"
	case errors.As(err, &pg) && pg.Code == postgresDiskFull:
		return "the Postgres server's disk"
	case errors.Is(err, syscall.ENOSPC):
		return "the data directory's disk"
	}
	return ""
}

// Problem is one thing wrong with an input, located by a JSON pointer
// (RFC 6901) into the document the caller sent.
type Problem struct {
	Pointer string `json:"pointer" example:"/parameters/required/0"`
	Message string `json:"message" example:"required property \"path\" is not defined in properties"`
}

// ValidationError carries every problem found in one input, so a caller can
// fix them all at once. It matches ErrInvalid with errors.Is.
type ValidationError struct {
	What     string
	Problems []Problem
}

func (e *ValidationError) Error() string {
	parts := make([]string, 0, len(e.Problems))
	for _, p := range e.Problems {
		parts = append(parts, p.Pointer+": "+p.Message)
	}
	return fmt.Sprintf("invalid %s: %s", e.What, strings.Join(parts, "; "))
}

// Is makes errors.Is(err, ErrInvalid) true for validation errors.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }
