package models

import (
	"errors"
	"fmt"
	"strings"
)

// The error vocabulary every layer wraps with context, e.g.
// fmt.Errorf("%w: tool %q", ErrNotFound, name). Handlers map them to HTTP
// statuses in one place.
var (
	ErrInvalid      = errors.New("invalid input")
	ErrUnauthorized = errors.New("unauthorized")
	ErrForbidden    = errors.New("forbidden")
	ErrNotFound     = errors.New("not found")
	ErrConflict     = errors.New("conflict")
	ErrRateLimited  = errors.New("too many requests")
)

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
