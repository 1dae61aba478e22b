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
