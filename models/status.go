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
)

// Terminal reports whether a status is final.
func Terminal(status string) bool {
	switch status {
	case StatusQueued, StatusRunning, StatusAwaitingApproval:
		return false
	}
	return true
}
