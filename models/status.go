package models

// Statuses of a call, as its record stores them.
const (
	StatusSucceeded        = "succeeded"
	StatusFailed           = "failed"
	StatusAwaitingApproval = "awaiting_approval"
	StatusQueued           = "queued"
	StatusRunning          = "running"
	StatusInterrupted      = "interrupted"
	StatusRefused          = "refused"
	// StatusUnrecorded is never stored: it is the answer to a call that
	// ran but whose record could not be made durable (error code
	// CodeNotRecorded), carrying the tool's result all the same.
	StatusUnrecorded = "unrecorded"
)

// NothingRan reports whether a call that ended with status and error
// code is a refusal: a guard refused it, or a reviewer denied it or let it
// expire (recorded as failed with CodeConfirmationDenied, as agents have
// always read it). No tool ran, so the statistics and the alerts count it
// as refused, never as the tool failing.
func NothingRan(status, code string) bool {
	return status == StatusRefused || status == StatusFailed && code == CodeConfirmationDenied
}

// nothingRanSQL is NothingRan as an SQL condition on the calls table.
const nothingRanSQL = "(status = 'refused' OR (status = 'failed' AND error_code = 'CONFIRMATION_DENIED'))"

// Terminal reports whether a status is final.
func Terminal(status string) bool {
	switch status {
	case StatusQueued, StatusRunning, StatusAwaitingApproval:
		return false
	}
	return true
}

// CodeNotRecorded is the error code of a StatusUnrecorded answer: the
// tool ran, its result is in the answer, and the call is missing from the
// history because neither the database nor the local spool could keep
// it. Not retryable: calling again would run the tool's effect again.
// HTTP answers it with 503.
const CodeNotRecorded = "NOT_RECORDED"
