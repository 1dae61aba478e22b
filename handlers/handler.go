// Package handlers holds the /api/v1 JSON handlers (the console's pages
// are in handlers/console): each binds its input, calls one service and
// responds. Fail is the one place that turns errors into HTTP statuses, by
// their code through the table in errors.go, which call results and
// console forms answer with too.
package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/audit"
	"toolbelt/services/callbacks"
	"toolbelt/services/catalog"
	"toolbelt/services/connect"
	"toolbelt/services/invoke"
	"toolbelt/services/ops"
	"toolbelt/services/selection"
	"toolbelt/services/upstream"
	"toolbelt/services/vault"
)

// MaxBodyBytes caps every request body.
const MaxBodyBytes = 1 << 20

// Handler serves the API. It holds the services it calls and
// nothing else.
type Handler struct {
	Registry *catalog.Registry
	Selector *selection.Selector
	Invoker  *invoke.Invoker
	// CallbackSecrets sign the results POSTed to callback URLs.
	CallbackSecrets *callbacks.Secrets
	Accounts        *access.Accounts
	Health          *ops.Health
	Stats           *ops.Stats
	Alerts          *ops.Alerts
	// OpenAPI imports tools from OpenAPI documents.
	OpenAPI *catalog.OpenAPIImporter
	// Upstreams are the MCP servers whose tools Toolbelt serves.
	Upstreams *upstream.Manager
	// Connect holds people's connected accounts at the upstreams that act
	// as each person.
	Connect *connect.Service
	// Audit reads the audit log.
	Audit *audit.Log
	// Secrets keep the values callers store for themselves.
	Secrets *vault.Secrets
	// EventStreams, when set, caps the call event streams each principal
	// holds open.
	EventStreams *access.Holds
	Log          *slog.Logger
	// Links are shown on the home page.
	Links Links
	// ErrorPage renders an error for a browser (WantsHTML): the console's
	// error page, framed for the signed-in user. Nil: errors are JSON.
	ErrorPage func(c *gin.Context, status int, body ErrorBody)
}

// Links are the URLs the home page points to.
type Links struct {
	Swagger string
	Healthz string
	Readyz  string
}

// ErrorBody is the one JSON shape of every error outside tool calls.
type ErrorBody struct {
	Error APIError `json:"error"`
}

// APIError says what went wrong; Problems lists every invalid field of a
// 422 answer, each located by a JSON pointer.
type APIError struct {
	Code     string           `json:"code" example:"VALIDATION_ERROR"`
	Message  string           `json:"message" example:"invalid tool definition"`
	Problems []models.Problem `json:"problems,omitempty"`
	// Suggestions name real tools close to an unknown one.
	Suggestions []string `json:"suggestions,omitempty" example:"file_read,file_list"`
	RequestID   string   `json:"request_id,omitempty" example:"3f2a9c0d1b7e4a56"`
}

// Wrap adapts a handler that returns an error to Gin, sending the error
// through Fail.
func (h *Handler) Wrap(fn func(*gin.Context) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := fn(c); err != nil {
			h.Fail(c, err)
		}
	}
}

// Fail answers err with the status its kind calls for. Server faults are
// logged with their detail and answered with "internal error" only.
func (h *Handler) Fail(c *gin.Context, err error) {
	status, body := Classify(c, h.Log, err)
	if h.ErrorPage != nil && WantsHTML(c) {
		h.ErrorPage(c, status, body)
		return
	}
	// The web layer writes the OAuth challenge (resource metadata and
	// scopes) on its own routes; anything else still says Bearer.
	if status == http.StatusUnauthorized && c.Writer.Header().Get("WWW-Authenticate") == "" {
		c.Header("WWW-Authenticate", `Bearer realm="toolbelt"`)
	}
	c.AbortWithStatusJSON(status, body)
}

// Classify is the status and body err answers with: the status of its
// code (httpStatus), its message, and what its kind adds (the problems of
// a validation error, the tools closest to an unknown one, the wait after
// too many wrong keys). A server fault is logged with its detail and
// answered "internal error" only, log getting the detail.
func Classify(c *gin.Context, log *slog.Logger, err error) (int, ErrorBody) {
	reqID := c.GetString(RequestIDKey)
	code := CodeOf(err)
	b := ErrorBody{Error: APIError{Code: code, Message: err.Error(), RequestID: reqID}}
	var ve *models.ValidationError
	var unknown *selection.UnknownToolError
	var guesses *access.TooManyGuessesError
	switch {
	case code == models.CodeValidation && errors.As(err, &ve):
		b.Error.Message, b.Error.Problems = "invalid "+ve.What, ve.Problems
	case code == models.CodePayloadTooLarge:
		b.Error.Message = fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes)
	case code == models.CodeNotFound && errors.As(err, &unknown):
		b.Error.Suggestions = unknown.Suggestions
	case code == models.CodeRateLimit && errors.As(err, &guesses):
		c.Header("Retry-After", strconv.Itoa(guesses.RetryAfter))
	case code == models.CodeInternal:
		log.ErrorContext(c.Request.Context(), "request failed", "err", err, "method", c.Request.Method,
			"route", c.FullPath(), "request_id", reqID)
		b.Error.Message = "internal error"
	case code == models.CodeUnavailable:
		log.WarnContext(c.Request.Context(), "request failed: the database does not answer", "err", err, "method", c.Request.Method,
			"route", c.FullPath(), "request_id", reqID)
		b.Error.Message = "the database does not answer (restarting or unreachable); nothing was done: retry in a few seconds"
		c.Header("Retry-After", "2")
	case code == models.CodeStorageFull:
		// The detail (paths, the engine's text) goes to the log; the
		// answer names the disk, for whoever reads it to tell an operator.
		log.ErrorContext(c.Request.Context(), "request failed: disk full", "err", err, "method", c.Request.Method,
			"route", c.FullPath(), "request_id", reqID)
		if disk := models.FullDisk(err); disk != "" {
			b.Error.Message = disk + " is full: the request could not be completed; retry once space is freed"
		}
	}
	return StatusFor(code), b
}

// WantsHTML reports whether an error should be a page: console paths, and
// browsers asking for HTML outside the API.
func WantsHTML(c *gin.Context) bool {
	p := c.Request.URL.Path
	if p == "/admin" || strings.HasPrefix(p, "/admin/") {
		return true
	}
	if strings.HasPrefix(p, "/api/") || p == "/mcp" || p == "/metrics" {
		return false
	}
	return strings.Contains(c.GetHeader("Accept"), "text/html")
}

// NotFound answers requests no route matches.
func (h *Handler) NotFound(c *gin.Context) {
	h.Fail(c, models.ErrNotFound.Errorf("no endpoint %s %s", c.Request.Method, c.Request.URL.Path))
}

// MethodNotAllowed answers a known path asked with the wrong method.
func (h *Handler) MethodNotAllowed(c *gin.Context) {
	h.Fail(c, errMethod.Errorf("%s is not supported on %s", c.Request.Method, c.Request.URL.Path))
}

// bindJSON decodes a JSON request body into v strictly: the content type
// must be JSON, the body valid UTF-8, within MaxBodyBytes, one value, and
// free of fields v does not have.
func bindJSON(c *gin.Context, v any) error {
	if ct := c.GetHeader("Content-Type"); ct != "application/json" { // the usual one needs no parsing
		mt, params, err := mime.ParseMediaType(ct)
		if ct == "" || err != nil || mt != "application/json" {
			return errMediaType.Errorf("send the body as application/json (got %q)", ct)
		}
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
			return errMediaType.Errorf("charset %q; send UTF-8", cs)
		}
	}
	raw, err := io.ReadAll(io.LimitReader(c.Request.Body, MaxBodyBytes+1))
	if err != nil {
		return err
	}
	if len(raw) > MaxBodyBytes {
		return errTooLarge
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return models.ErrInvalid.Errorf("request body is empty; send a JSON object")
	}
	if !utf8.Valid(raw) {
		return models.ErrInvalid.Errorf("request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if !onlyValue(dec, raw) {
		return models.ErrInvalid.Errorf("request body holds more than one JSON value")
	}
	return nil
}

// onlyValue says whether nothing but JSON white space follows the value
// dec decoded from raw: what dec.Token answering io.EOF says, read from
// raw without refilling the decoder's buffer (a copy of the body) and
// scanning on.
func onlyValue(dec *json.Decoder, raw []byte) bool {
	return len(bytes.TrimLeft(raw[dec.InputOffset():], " \t\r\n")) == 0
}

// decodeError turns a JSON decoding error into a message a client can act
// on; a value of the wrong type becomes a 422 problem at its pointer.
func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return models.ErrInvalid.Errorf("malformed JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		ptr := "/" + strings.ReplaceAll(typ.Field, ".", "/")
		if typ.Field == "" {
			ptr = ""
		}
		return &models.ValidationError{What: "request body", Problems: []models.Problem{{
			Pointer: ptr, Message: fmt.Sprintf("must be %s, not JSON %s", jsonTypeName(typ.Type.Kind().String()), typ.Value),
		}}}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return models.ErrInvalid.Errorf("malformed JSON: the body ends too early")
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return models.ErrInvalid.Errorf("%s is not part of this request", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return models.ErrInvalid.Errorf("%v", err)
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "int", "int64", "int32", "uint", "uint64", "uint32":
		return "an integer"
	case "float64", "float32":
		return "a number"
	}
	return "a " + kind
}

// Context keys the web layer sets.
const (
	RequestIDKey = "request_id"
	principalKey = "principal"
)

// SetPrincipal records the authenticated principal of a request.
func SetPrincipal(c *gin.Context, p *models.Principal) { c.Set(principalKey, p) }

// CurrentPrincipal returns the authenticated principal, or nil.
func CurrentPrincipal(c *gin.Context) *models.Principal {
	p, _ := c.Get(principalKey)
	pr, _ := p.(*models.Principal)
	return pr
}

// IntQuery reads an optional integer query parameter.
func IntQuery(c *gin.Context, name string) (int, error) {
	s := c.Query(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, models.ErrInvalid.Errorf("query parameter %s=%q is not an integer", name, s)
	}
	return n, nil
}

// IDParam reads a positive integer path parameter.
func IDParam(c *gin.Context, name string) (uint, error) {
	s := c.Param(name)
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 0 {
		return 0, models.ErrInvalid.Errorf("%s %q is not a positive integer id", name, s)
	}
	return uint(n), nil
}
