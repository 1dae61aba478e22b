package handlers

import (
	"errors"
	"net/http"

	"toolbelt/models"
)

// httpStatus is the one table from the error codes (models/errors.go) to
// HTTP statuses. Fail answers errors with it, StatusOf the calls a guard
// refused, and the console pages their forms; TestEveryCodeHasAStatus
// fails for a code without an entry.
var httpStatus = map[string]int{
	models.CodeInvalidRequest:       http.StatusBadRequest,
	models.CodeUnauthorized:         http.StatusUnauthorized,
	models.CodeForbidden:            http.StatusForbidden,
	models.CodeNotFound:             http.StatusNotFound,
	models.CodeConflict:             http.StatusConflict,
	models.CodeMethodNotAllowed:     http.StatusMethodNotAllowed,
	models.CodePayloadTooLarge:      http.StatusRequestEntityTooLarge,
	models.CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	models.CodeValidation:           http.StatusUnprocessableEntity,
	models.CodeRateLimit:            http.StatusTooManyRequests,
	models.CodeInternal:             http.StatusInternalServerError,
	models.CodeNotRecorded:          http.StatusServiceUnavailable,
	models.CodeUnavailable:          http.StatusServiceUnavailable,
	models.CodeStorageFull:          http.StatusInsufficientStorage,

	// The codes a guard refuses a call with.
	models.CodeToolNotFound:         http.StatusNotFound,
	models.CodePermissionDenied:     http.StatusForbidden,
	models.CodeConfirmationRequired: http.StatusForbidden,
	models.CodePathNotAllowed:       http.StatusForbidden,
	models.CodeCommandRejected:      http.StatusForbidden,
	models.CodeURLNotAllowed:        http.StatusForbidden,
	models.CodeQueueFull:            http.StatusTooManyRequests,

	// The codes only a call that ran ends with: it answers 200, its
	// failure being data for the agent's LLM.
	models.CodeConfirmationDenied: http.StatusOK,
	models.CodeTimeout:            http.StatusOK,
	models.CodeCancelled:          http.StatusOK,
	models.CodeUpstream:           http.StatusOK,
	// Nothing ran: the person the call acts for connects first
	// (connect_url); a failure the agent reads, as the others here.
	models.CodeUpstreamNotConnected: http.StatusOK,
	models.CodeExecutionFailed:      http.StatusOK,
	models.CodeSandboxUnavailable:   http.StatusOK,
	models.CodeSandboxLimit:         http.StatusOK,
}

// Errors for requests the HTTP layer itself refuses.
var (
	errTooLarge  = models.NewKind(models.CodePayloadTooLarge, "request body too large")
	errMediaType = models.NewKind(models.CodeUnsupportedMediaType, "unsupported media type")
	errMethod    = models.NewKind(models.CodeMethodNotAllowed, "method not allowed")
)

// CodeOf is the code err answers with (models.CodeOf), counting a body
// that net/http's MaxBytesReader cut off as too large.
func CodeOf(err error) string {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return models.CodePayloadTooLarge
	}
	return models.CodeOf(err)
}

// StatusFor is the HTTP status of an answer with code; an unknown code
// (none is: see the test) answers 500.
func StatusFor(code string) int {
	if s, ok := httpStatus[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// ErrorStatus is the HTTP status err answers with.
func ErrorStatus(err error) int { return StatusFor(CodeOf(err)) }
