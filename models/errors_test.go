package models

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
)

// An error of a kind reads as the kind wrapped by fmt.Errorf would, matches
// its kind and what its detail wraps, answers with the kind's code, and
// keeps its detail apart for a person, under any wrapping.
func TestKindErrorf(t *testing.T) {
	err := fmt.Errorf("revoke api key 1: %w", ErrConflict.Errorf("key %d is the last active admin key", 1))
	if got, want := err.Error(), fmt.Errorf("revoke api key 1: %w", ErrConflict.Errorf("key %d is the last active admin key", 1)).Error(); got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if !errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
		t.Error("errors.Is does not find the kind alone")
	}
	if got := CodeOf(err); got != CodeConflict {
		t.Errorf("code %s", got)
	}
	if got := Detail(err); got != "key 1 is the last active admin key" {
		t.Errorf("detail %q", got)
	}
	wrapped := ErrInvalid.Errorf("read the body: %w", io.ErrUnexpectedEOF)
	if !errors.Is(wrapped, io.ErrUnexpectedEOF) || !errors.Is(wrapped, ErrInvalid) {
		t.Error("%w in the detail does not wrap")
	}
}

func TestCodeOf(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{ErrNotFound, CodeNotFound},
		{ErrNotFound.Errorf("tool %q", "x"), CodeNotFound},
		{ErrForbidden.Errorf("role %s", "agent"), CodeForbidden},
		{&ValidationError{What: "tool"}, CodeValidation},
		{fmt.Errorf("register: %w", &ValidationError{What: "tool"}), CodeValidation},
		{isNotFound{}, CodeNotFound},
		{NewKind(CodeMethodNotAllowed, "method not allowed"), CodeMethodNotAllowed},
		{errors.New("disk on fire"), CodeInternal},
		{nil, ""},
	}
	for _, tc := range cases {
		if got := CodeOf(tc.err); got != tc.want {
			t.Errorf("CodeOf(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
	if got := Detail(errors.New("plain")); got != "plain" {
		t.Errorf("detail of an error without a kind: %q", got)
	}
}

// A call made without directions, through the REST API or by the server
// itself, is pointed at the API's endpoints.
func TestDirectionsOf(t *testing.T) {
	rest := DirectionsOf(context.Background())
	if rest.SearchTools() != "POST /api/v1/tools/select" || rest.PollCall("c8") != "Poll GET /api/v1/calls/c8" {
		t.Errorf("without directions: %q, %q", rest.SearchTools(), rest.PollCall("c8"))
	}
}

// isNotFound matches ErrNotFound by its Is method, as
// selection.UnknownToolError does.
type isNotFound struct{}

func (isNotFound) Error() string        { return "tool does not exist" }
func (isNotFound) Is(target error) bool { return target == ErrNotFound }
