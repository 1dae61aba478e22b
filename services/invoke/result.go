package invoke

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"

	"toolbelt/models"
)

// CallRequest is what an agent sends to run a tool.
type CallRequest struct {
	Tool      string          `json:"tool" example:"file_read"`
	Arguments json.RawMessage `json:"arguments,omitempty" swaggertype:"object"`
	SessionID string          `json:"session_id,omitempty" example:"run-42"`
	Version   string          `json:"version,omitempty" example:"1.0.0"`
	// Async answers 202 at once; the result is polled at the call's URL.
	Async bool `json:"async,omitempty"`
	// CallbackURL, on a call answered 202 (async, or waiting for
	// approval), receives its ToolResult by a signed POST when it ends
	// (docs/calls.md#completion-callbacks). It must be an absolute http(s)
	// URL that http_request could reach.
	CallbackURL string `json:"callback_url,omitempty" example:"https://agents.example.com/hooks/toolbelt"`
	// SubjectToken is the caller's access token of the organisation's
	// OpenID provider, for token exchange (runners.Call.SubjectToken):
	// from the call's context (runners.WithSubjectToken, where the
	// authentication put it) unless set, never from a body, never
	// recorded (a call that runs later from its record has none).
	SubjectToken string `json:"-" swaggerignore:"true"`
}

// ToolResult is the answer of every call (docs/calls.md): its failures are data
// for the agent's LLM, with a suggestion of what to do next.
type ToolResult struct {
	CallID   string          `json:"call_id" example:"5d1e0c2a9b7f4e31"`
	Status   string          `json:"status" example:"succeeded"`
	Success  bool            `json:"success"`
	Data     json.RawMessage `json:"data,omitempty" swaggertype:"object"`
	Error    *ToolError      `json:"error,omitempty"`
	Metadata CallMetadata    `json:"metadata"`
	// encoded is this result's JSON as the history recorded it, so the
	// answer is not encoded twice; nil when not recorded or truncated.
	encoded []byte
	// dataEncoded says Data is already as encoding/json writes it (a
	// cached result's, encoded once for all its hits).
	dataEncoded bool
	// record and committed are the call's record and the channel that
	// receives the result of its write (nil when the call was recorded
	// otherwise, such as with its approval).
	record    *models.Call
	committed <-chan error
}

// JSON is the result encoded as JSON.
func (r ToolResult) JSON() []byte {
	if r.encoded != nil {
		return r.encoded
	}
	if raw, ok := r.appendSuccess(make([]byte, 0, 128+len(r.Data))); ok {
		return raw
	}
	raw, err := json.Marshal(r)
	if err != nil { // only a malformed Data could fail; say so
		raw, _ = json.Marshal(ToolResult{CallID: r.CallID, Status: models.StatusFailed, Error: &ToolError{Code: models.CodeInternal, Message: "the result could not be encoded: " + err.Error()}, Metadata: r.Metadata})
	}
	return raw
}

// appendSuccess appends the JSON of a result without an error, byte for
// byte what encoding/json makes of it (Data compacted and HTML-escaped);
// false for one with an error, or with Data that is not valid JSON. Every
// call's answer and history record is encoded, and reflection was a
// tenth of a cached call's own time.
func (r ToolResult) appendSuccess(b []byte) ([]byte, bool) {
	if r.Error != nil || !plainASCII(r.CallID) || !plainASCII(r.Status) || !plainASCII(r.Metadata.ToolVersion) {
		return b, false
	}
	b = append(b, `{"call_id":"`...)
	b = append(b, r.CallID...)
	b = append(b, `","status":"`...)
	b = append(b, r.Status...)
	b = append(b, `","success":`...)
	b = strconv.AppendBool(b, r.Success)
	if len(r.Data) > 0 {
		b = append(b, `,"data":`...)
		if r.dataEncoded {
			b = append(b, r.Data...)
		} else {
			data, ok := encodedData(r.Data)
			if !ok {
				return b, false
			}
			b = append(b, data...)
		}
	}
	b = append(b, `,"metadata":{"duration":`...)
	b = strconv.AppendInt(b, r.Metadata.Duration, 10)
	b = append(b, `,"cached":`...)
	b = strconv.AppendBool(b, r.Metadata.Cached)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(r.Metadata.Attempts), 10)
	if r.Metadata.ToolVersion != "" {
		b = append(b, `,"tool_version":"`...)
		b = append(b, r.Metadata.ToolVersion...)
		b = append(b, '"')
	}
	return append(b, "}}"...), true
}

// encodedData is data as encoding/json writes a json.RawMessage:
// compacted and HTML-escaped; false when it is not JSON.
func encodedData(data json.RawMessage) (json.RawMessage, bool) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return nil, false
	}
	var out bytes.Buffer
	json.HTMLEscape(&out, compact.Bytes())
	return out.Bytes(), true
}

// plainASCII reports whether s is printable ASCII that JSON and HTML
// escaping leave as it is.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// ToolError says why a call did not succeed and what the LLM should do.
type ToolError struct {
	Code       string           `json:"code" example:"VALIDATION_ERROR"`
	Message    string           `json:"message"`
	Retryable  bool             `json:"retryable"`
	Suggestion string           `json:"suggestion,omitempty"`
	Problems   []models.Problem `json:"problems,omitempty"`
	// RetryAfter is the wait in seconds a limit asks for (also sent as the
	// Retry-After header).
	RetryAfter int `json:"retry_after,omitempty"`
	// ConnectURL, with UPSTREAM_NOT_CONNECTED, is the console page where
	// the person the call acts for connects their account or secret.
	ConnectURL string `json:"connect_url,omitempty"`
}

// CallMetadata describes how a call ran.
type CallMetadata struct {
	Duration    int64  `json:"duration" example:"12"`
	Cached      bool   `json:"cached"`
	Attempts    int    `json:"attempts"`
	ToolVersion string `json:"tool_version,omitempty" example:"1.0.0"`
}

func refusal(code, msg, suggestion string) ToolResult {
	return ToolResult{Status: models.StatusRefused, Error: &ToolError{Code: code, Message: msg, Suggestion: suggestion}}
}

func failure(code, msg string, retryable bool, suggestion string) ToolResult {
	return ToolResult{Status: models.StatusFailed, Error: &ToolError{Code: code, Message: msg, Retryable: retryable, Suggestion: suggestion}}
}

// storeFailure is the result of a call a guard could not check because
// the store failed with err: refused UNAVAILABLE (503, retryable after
// 2 s) when the database does not answer (a restart: nothing ran); else
// INTERNAL.
func storeFailure(err error) ToolResult {
	if models.Unavailable(err) {
		res := refusal(models.CodeUnavailable, "the database does not answer (restarting or unreachable); the tool did not run", "Try again in a few seconds.")
		res.Error.Retryable, res.Error.RetryAfter = true, 2
		return res
	}
	return failure(models.CodeInternal, "internal error", true, "Try again.")
}

// SessionIDRule is what a session id may be: one path element that
// cannot name a parent, itself or a hidden entry.
const SessionIDRule = "session_id must be 1 to 128 letters, digits, '.', '_' or '-', not starting with '.' (it names one directory: \".\", \"..\" and hidden names are refused)"

// sessionPattern is SessionIDRule.
var sessionPattern = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$`)

// ValidSessionID reports whether id may name a call session.
func ValidSessionID(id string) bool { return sessionPattern.MatchString(id) }
