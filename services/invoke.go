package services

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/browser"
	"toolbelt/services/netpolicy"
	"toolbelt/services/ops"
	"toolbelt/services/redact"
	"toolbelt/services/runners"
	"toolbelt/services/sandbox"
	"toolbelt/services/selection"
	"toolbelt/services/tooldef"
)

// CallRequest is what an agent sends to run a tool.
type CallRequest struct {
	Tool      string          `json:"tool" example:"file_read"`
	Arguments json.RawMessage `json:"arguments,omitempty" swaggertype:"object"`
	SessionID string          `json:"session_id,omitempty" example:"run-42"`
	Version   string          `json:"version,omitempty" example:"1.0.0"`
	// Async answers 202 at once; the result is polled at the call's URL.
	Async bool `json:"async,omitempty"`
}

// ToolResult is the answer of every call (DESIGN.md): its failures are data
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
}

// CallMetadata describes how a call ran.
type CallMetadata struct {
	Duration    int64  `json:"duration" example:"12"`
	Cached      bool   `json:"cached"`
	Attempts    int    `json:"attempts"`
	ToolVersion string `json:"tool_version,omitempty" example:"1.0.0"`
}

// call is one call moving through the guard chain.
type call struct {
	id      string
	req     CallRequest
	caller  *models.Principal
	def     tooldef.Definition
	version uint // version id
	schema  *jsonschema.Schema
	args    map[string]any
	// dir is the session's work directory, made by the secure guard.
	dir      runners.WorkDir
	started  time.Time
	attempts int
	cached   bool
	// approval is the id of the approval this run may consume (a call
	// resumed after a reviewer approved it).
	approval string
	// waiting is set when the call was parked for approval.
	waiting bool
	// emit streams a tool's progress to the call's event subscribers.
	emit func(event string, data any)
	// created is when the call was first received (a resumed call keeps
	// it); runMs is the time spent executing.
	created time.Time
	runMs   int64
	// queueMs is the time spent waiting for a slot in the category queue.
	queueMs int64
	// redactedArgs, when set, are the arguments already redacted for the
	// history (a cache hit reuses the first hit's).
	redactedArgs string
	// parent is the composite call this call is a step of; preApproved
	// says that composite was approved by a reviewer, which covers its
	// steps; approvedRun is set on a call that consumed an approval or is
	// covered by one (its own steps are then covered too).
	parent      string
	preApproved bool
	approvedRun bool
	depth       int
	// span is, per guard of the chain, the time spent in it and the steps
	// after it; the ninth, the execution's (for the guard timings).
	span [chainGuards + 1]time.Duration
	// cacheKey is the results cache's key, once made (cacheable tools),
	// and hit the cached result validate found under it.
	cacheKey string
	hit      *cachedResult
	// tracked marks a call made cancellable before the chain (a
	// background call); stopped, a call whose context was cancelled while
	// it ran.
	tracked, stopped bool
	// log is the tool's logger, carrying the call id.
	log *slog.Logger
}

// Step handles a call and returns its result; Guard wraps a step with one
// check that may end the call early.
type (
	Step  func(ctx context.Context, c *call) ToolResult
	Guard func(next Step) Step
)

// compose wraps final in guards, the first outermost.
func compose(guards ...Guard) func(Step) Step {
	return func(final Step) Step {
		for i := len(guards) - 1; i >= 0; i-- {
			final = guards[i](final)
		}
		return final
	}
}

// Invoker is the invoke and execute stages: every call passes the guard
// chain in DESIGN.md's order, then runs, and is recorded.
type Invoker struct {
	store    *models.Store
	selector *selection.Selector
	authz    *access.Authz
	log      *slog.Logger
	dataDir  string
	schemas  *expirable.LRU[uint, *jsonschema.Schema]
	results  *expirable.LRU[string, *cachedResult]
	limits   *rateLimits
	queues   *queues
	sleep    func(context.Context, time.Duration) error
	redactor *redact.Redactor
	net      netpolicy.Policy
	bg       *background
	calls    *callRecorder
	tools    sync.Map     // name → *resolvedTool, the current versions
	running  sync.Map     // call id → context.CancelFunc of a call in flight
	inFlight atomic.Int64 // calls being handled (Call) or run in the background
	// interrupting is set when Shutdown's deadline passed: calls
	// cancelled from then on are recorded as interrupted.
	interrupting atomic.Bool
	events       *broker
	metrics      *ops.Metrics
	run          Step
	// runners execute what passed the chain.
	runners *runners.Table
}

// NewInvoker returns the invoker; session work directories live under
// dataDir/sessions.
// WithSleep replaces the wait between retries (tests pass a fake clock so
// they never sleep).
func (inv *Invoker) WithSleep(sleep func(context.Context, time.Duration) error) *Invoker {
	inv.sleep = sleep
	return inv
}

// queueLimits overrides DefaultQueueLimits per category.
func NewInvoker(store *models.Store, selector *selection.Selector, authz *access.Authz, redactor *redact.Redactor, netPolicy netpolicy.Policy, dataDir string, queueLimits map[string]int, log *slog.Logger) *Invoker {
	inv := &Invoker{
		store: store, selector: selector, authz: authz, redactor: redactor, log: log, dataDir: dataDir,
		net: netPolicy, runners: runners.New(dataDir, netPolicy, log),
		schemas: newSchemaCache(),
		results: newResultsCache(),
		limits:  newRateLimits(),
		queues:  newQueues(queueLimits, 0),
		sleep:   sleepCtx,
		bg:      newBackground(),
		events:  newBroker(),
		calls: newCallRecorder(store, func(c *models.Call) { c.Arguments = string(redactor.RedactJSON([]byte(c.Arguments))) },
			openCallJournal(dataDir, log), log),
	}
	// The guard chain, in DESIGN.md's order, each guard timed on its own.
	inv.run = compose(
		inv.timed(0, "resolve", inv.resolve), inv.timed(1, "validate", inv.validate),
		inv.timed(2, "authorize", inv.authorize), inv.timed(3, "approve", inv.approve),
		inv.timed(4, "secure", inv.secure), inv.timed(5, "cache", inv.cache), inv.cancellable,
		inv.timed(6, "limit", inv.limit), inv.timed(7, "queue", inv.queue),
	)(inv.execute)
	return inv
}

// Flush waits until every call record queued so far is written.
func (inv *Invoker) Flush() { inv.calls.sync() }

// WithMetrics makes the invoker report to m.
func (inv *Invoker) WithMetrics(m *ops.Metrics) *Invoker {
	inv.metrics = m
	inv.runners.WithMetrics(m)
	return inv
}

// WithSandbox sets the sandbox that tools with security.sandbox (and
// command runners) run in; without one they refuse with
// SANDBOX_UNAVAILABLE, never running unsandboxed.
func (inv *Invoker) WithSandbox(s *sandbox.Sandbox) *Invoker {
	inv.runners.WithSandbox(s)
	return inv
}

// Sandbox is the sandbox in use (nil when none was set).
func (inv *Invoker) Sandbox() *sandbox.Sandbox { return inv.runners.Sandbox() }

// WithSessionQuota sets the disk quota of every session's work directory
// (runners.DefaultSessionQuota otherwise).
func (inv *Invoker) WithSessionQuota(q runners.Quota) *Invoker {
	inv.runners.WithSessionQuota(q)
	return inv
}

// WithBrowser sets the Chromium that browser_navigate drives.
func (inv *Invoker) WithBrowser(b *browser.Browser) *Invoker {
	inv.runners.WithBrowser(b)
	return inv
}

// WithSearch sets the SearXNG-compatible endpoint web_search queries.
func (inv *Invoker) WithSearch(endpoint string) *Invoker {
	inv.runners.WithSearch(endpoint)
	return inv
}

// WithSecrets sets the values, by variable name, that http runners may
// reference in headers as {{env.NAME}}.
func (inv *Invoker) WithSecrets(secrets map[string]string) *Invoker {
	inv.runners.WithSecrets(secrets)
	return inv
}

// timed measures the time a guard spends itself: the time of its step
// minus the time of the steps it calls. Each timed guard reads the clock
// on entry and on exit and adds its time to c.span[i], which the guard
// before it subtracts (the untimed steps between two guards count as the
// first one's); the last guard's next step, the execution, is timed
// apart. Two clock reads a guard: every call passes eight.
func (inv *Invoker) timed(i int, name string, g Guard) Guard {
	return func(next Step) Step {
		inner := next
		if i == chainGuards-1 {
			inner = func(ctx context.Context, c *call) ToolResult {
				if inv.metrics == nil {
					return next(ctx, c)
				}
				start := time.Now()
				res := next(ctx, c)
				c.span[i+1] += time.Since(start)
				return res
			}
		}
		step := g(inner)
		var once sync.Once
		var observe func(time.Duration)
		return func(ctx context.Context, c *call) ToolResult {
			if inv.metrics == nil {
				return step(ctx, c)
			}
			start := time.Now()
			c.span[i+1] = 0
			res := step(ctx, c)
			d := time.Since(start)
			c.span[i] += d
			once.Do(func() { observe = inv.metrics.GuardTimer(name) })
			observe(d - c.span[i+1])
			return res
		}
	}
}

// chainGuards is the number of timed guards in the chain.
const chainGuards = 8

// Call runs one tool call through the chain and records it.
func (inv *Invoker) Call(ctx context.Context, caller *models.Principal, req CallRequest) ToolResult {
	// In flight until recorded: Shutdown waits for it (one atomic add; the
	// call becomes cancellable only if it runs, in cancellable).
	inv.inFlight.Add(1)
	defer inv.inFlight.Add(-1)
	c := &call{id: models.NewID(), req: req, caller: caller, started: time.Now()}
	if req.SessionID == "" && caller != nil {
		c.req.SessionID = fmt.Sprintf("principal-%d", caller.ID)
	}
	if req.Async {
		return inv.enqueue(ctx, c)
	}
	return inv.finish(ctx, c, inv.guarded(ctx, c))
}

// cancellable makes a call that is going to run cancellable by id (DELETE,
// and Shutdown past its deadline) until it ends. It stands after the
// cache in the chain: a call refused or answered from the cache is over in
// microseconds and never pays for it. Background calls are tracked for
// their whole run by resume.
func (inv *Invoker) cancellable(next Step) Step {
	return func(ctx context.Context, c *call) ToolResult {
		if c.tracked {
			return next(ctx, c)
		}
		ctx, cancel := inv.track(ctx, c.id)
		defer cancel()
		res := next(ctx, c)
		c.stopped = ctx.Err() != nil
		return res
	}
}

// track makes a call cancellable by id until the returned cancel runs.
// Past Shutdown's deadline a call is cancelled as it starts to run.
func (inv *Invoker) track(ctx context.Context, id string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	inv.running.Store(id, cancel)
	if inv.interrupting.Load() {
		cancel()
	}
	return ctx, func() {
		inv.running.Delete(id)
		cancel()
	}
}

// finish completes a result's metadata, records the call, and teaches the
// selection index from a success.
func (inv *Invoker) finish(ctx context.Context, c *call, res ToolResult) ToolResult {
	if (ctx.Err() != nil || c.stopped) && inv.interrupting.Load() && !res.Success {
		res = interrupted()
	}
	res.CallID = c.id
	res.Metadata.Duration = time.Since(c.started).Milliseconds()
	res.Metadata.Cached = c.cached
	res.Metadata.Attempts = c.attempts
	if c.def.Version != "" {
		res.Metadata.ToolVersion = c.def.Version
	}
	tool := c.def.Name
	if tool == "" {
		tool = "unknown" // never a name an agent made up: labels stay bounded
	}
	inv.metrics.Call(tool, res.Status, time.Since(c.started))
	if c.waiting {
		return res // parked for approval: recorded with its approval
	}
	res.encoded, res.record, res.committed = inv.record(ctx, c, res)
	if res.Success && !c.cached && inv.selector != nil {
		inv.selector.LearnFromCallLater(c.req.SessionID, c.def.Name)
	}
	return res
}

// precheck runs the guards that need no approval and change nothing.
func (inv *Invoker) precheck(ctx context.Context, c *call) ToolResult {
	if !runners.ValidSessionID(c.req.SessionID) {
		return inv.guarded(ctx, c)
	}
	return compose(inv.resolve, inv.validate, inv.authorize)(func(context.Context, *call) ToolResult {
		return ToolResult{Status: models.StatusQueued}
	})(ctx, c)
}

// guarded runs the chain, turning a panic anywhere into INTERNAL for this
// call only.
func (inv *Invoker) guarded(ctx context.Context, c *call) (res ToolResult) {
	defer func() {
		if p := recover(); p != nil {
			inv.log.ErrorContext(ctx, "tool call panicked", "call_id", c.id, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			res = failure(models.CodeInternal, "internal error while running the tool", false, "Try again later; if it persists, report the call id to an administrator.")
		}
	}()
	if !runners.ValidSessionID(c.req.SessionID) {
		return refusal(models.CodeValidation, runners.SessionIDRule, "Send a session_id such as \"run-42\".")
	}
	return inv.run(ctx, c)
}

func refusal(code, msg, suggestion string) ToolResult {
	return ToolResult{Status: models.StatusRefused, Error: &ToolError{Code: code, Message: msg, Suggestion: suggestion}}
}

func failure(code, msg string, retryable bool, suggestion string) ToolResult {
	return ToolResult{Status: models.StatusFailed, Error: &ToolError{Code: code, Message: msg, Retryable: retryable, Suggestion: suggestion}}
}

// resolve finds the tool (the requested version, or the current one). An
// unknown name gets the closest real tools as a suggestion.
func (inv *Invoker) resolve(next Step) Step {
	return func(ctx context.Context, c *call) ToolResult {
		name := c.req.Tool
		var rt *resolvedTool
		var err error
		if c.req.Version == "" {
			rt, err = inv.current(ctx, name)
		} else {
			rt, err = inv.version(ctx, name, c.req.Version)
		}
		switch {
		case errors.Is(err, models.ErrNotFound):
			sug, _ := inv.selector.Suggest(ctx, c.caller, c.req.SessionID, name, 5)
			msg := fmt.Sprintf("tool %q does not exist", name)
			if c.req.Version != "" && tooldef.NamePattern.MatchString(name) {
				msg = fmt.Sprintf("tool %q has no version %q (or does not exist)", name, c.req.Version)
			}
			hint := "Call " + models.DirectionsOf(ctx).SearchTools() + " with your task to find the right tool."
			if len(sug) > 0 {
				hint = "Use one of these tools instead: " + strings.Join(sug, ", ") + "."
			}
			return refusal(models.CodeToolNotFound, msg, hint)
		case errors.Is(err, errUndecodable):
			return failure(models.CodeInternal, "internal error", false, "Report the call id to an administrator.")
		case err != nil:
			inv.log.ErrorContext(ctx, "resolve tool", "err", err, "call_id", c.id)
			return failure(models.CodeInternal, "internal error", true, "Try again.")
		}
		c.def, c.version = rt.def, rt.versionID
		return next(ctx, c)
	}
}

// errUndecodable is a stored definition that does not decode.
var errUndecodable = errors.New("stored tool definition does not decode")

// current is the version of a tool in service, kept once resolved (until
// the catalog changes).
func (inv *Invoker) current(ctx context.Context, name string) (*resolvedTool, error) {
	if rt, ok := inv.tools.Load(name); ok {
		return rt.(*resolvedTool), nil
	}
	if !tooldef.NamePattern.MatchString(name) {
		return nil, models.ErrNotFound
	}
	_, ver, err := inv.store.ToolByName(ctx, name, false)
	if err != nil {
		return nil, err
	}
	rt, err := resolved(ver)
	if err != nil {
		return nil, err
	}
	inv.tools.Store(name, rt)
	return rt, nil
}

// version is one version of a tool in service (a retired tool runs in no
// version).
func (inv *Invoker) version(ctx context.Context, name, version string) (*resolvedTool, error) {
	if !tooldef.NamePattern.MatchString(name) {
		return nil, models.ErrNotFound
	}
	t, ver, err := inv.store.ToolVersion(ctx, name, version)
	if err != nil {
		return nil, err
	}
	if t.RetiredAt != nil {
		return nil, models.ErrNotFound
	}
	return resolved(ver)
}

func resolved(ver *models.ToolVersion) (*resolvedTool, error) {
	def, err := tooldef.Decode(ver.Definition)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUndecodable, err)
	}
	return &resolvedTool{def: def, versionID: ver.ID}, nil
}

// resolvedTool is a current version kept in memory between catalog
// changes.
type resolvedTool struct {
	def       tooldef.Definition
	versionID uint
}

// CatalogChanged forgets the resolved current versions; the registry calls
// it after every change.
func (inv *Invoker) CatalogChanged() { inv.tools.Clear() }

// validate checks the arguments against the version's compiled schema and
// lists every field error with a suggestion the LLM can act on.
func (inv *Invoker) validate(next Step) Step {
	return func(ctx context.Context, c *call) ToolResult {
		schema, ok := inv.schemas.Get(c.version)
		if !ok {
			var doc any
			dec := json.NewDecoder(bytes.NewReader(c.def.Parameters))
			dec.UseNumber()
			if err := dec.Decode(&doc); err != nil {
				return failure(models.CodeInternal, "the tool's schema does not load", false, "Report this tool to an administrator.")
			}
			s, err := tooldef.CompileSchema(doc)
			if err != nil {
				return failure(models.CodeInternal, "the tool's schema does not compile", false, "Report this tool to an administrator.")
			}
			inv.schemas.Add(c.version, s)
			schema = s
		}
		raw := c.req.Arguments
		if len(bytes.TrimSpace(raw)) == 0 {
			raw = json.RawMessage(`{}`)
		}
		args, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		obj, isObj := args.(map[string]any)
		if err != nil || !isObj {
			return ToolResult{Status: models.StatusRefused, Error: &ToolError{Code: models.CodeValidation, Message: "arguments must be a JSON object",
				Suggestion: "Send arguments as a JSON object matching this schema: " + string(c.def.Parameters)}}
		}
		// References to earlier results of the session are filled in
		// first, and the filled arguments are what is validated and run.
		if bytes.Contains(raw, []byte(`"`+refKey+`"`)) {
			if obj, err = inv.contextRefs(ctx, c, obj); err != nil {
				return refusal(models.CodeValidation, err.Error(),
					`Refer to a succeeded call of this session you may read: {"$ref": "call:<call id>#/data/<field>"}.`)
			}
			args = obj
		}
		// Arguments with a cached result passed this version's schema
		// before: validation is a pure function of both, so it is not run
		// again for the hits (it was a fifth of a cached call's chain).
		if c.def.Execution.Cacheable {
			if hit, ok := inv.results.Get(inv.cacheKey(c, obj)); ok && time.Now().Before(hit.expires) {
				c.args, c.hit = obj, hit // the cache guard answers with it
				return next(ctx, c)
			}
		}
		if err := schema.Validate(args); err != nil {
			var ve *jsonschema.ValidationError
			var ps []models.Problem
			if errors.As(err, &ve) {
				printer := message.NewPrinter(language.English)
				for _, leaf := range tooldef.Leaves(ve) {
					ptr := ""
					for _, seg := range leaf.InstanceLocation {
						ptr += "/" + tooldef.EscapePointer(seg)
					}
					ps = append(ps, models.Problem{Pointer: ptr, Message: leaf.ErrorKind.LocalizedString(printer)})
				}
			}
			fields := make([]string, 0, len(ps))
			for _, p := range ps {
				fields = append(fields, p.Pointer+" "+p.Message)
			}
			return ToolResult{Status: models.StatusRefused, Error: &ToolError{Code: models.CodeValidation,
				Message:    fmt.Sprintf("the arguments do not match the schema of %s: %s", c.def.Name, strings.Join(fields, "; ")),
				Problems:   ps,
				Suggestion: fmt.Sprintf("Fix the fields listed and call %s again. Its parameters schema is: %s", c.def.Name, string(c.def.Parameters))}}
		}
		c.args = obj
		return next(ctx, c)
	}
}

// authorize applies the security levels: admins may call anything,
// reviewers nothing; an agent may call a safe tool granted by name or
// category, a moderate or dangerous one only through its category.
func (inv *Invoker) authorize(next Step) Step {
	return func(ctx context.Context, c *call) ToolResult {
		if c.caller == nil || c.caller.Role == access.RoleAdmin {
			return next(ctx, c)
		}
		denied := refusal(models.CodePermissionDenied,
			fmt.Sprintf("you may not call %s (%s, %s)", c.def.Name, c.def.Category, c.def.Security.Level),
			"Do not retry this tool; ask the user or an administrator to grant it, or choose a tool you may use ("+models.DirectionsOf(ctx).SearchTools()+").")
		if c.caller.Role != access.RoleAgent {
			return denied
		}
		byCategory, err := inv.authz.MayUse(c.caller.ID, "", c.def.Category)
		if err != nil {
			return failure(models.CodeInternal, "internal error", true, "Try again.")
		}
		byName := false
		if c.def.Security.Level == tooldef.LevelSafe && !byCategory {
			if byName, err = inv.authz.MayUse(c.caller.ID, c.def.Name, "\x00"); err != nil {
				return failure(models.CodeInternal, "internal error", true, "Try again.")
			}
		}
		if !byCategory && !byName {
			return denied
		}
		return next(ctx, c)
	}
}

// approve holds dangerous and confirm-required calls for a human: the
// first time, the call is parked and an approval created (202); once a
// reviewer approves, the call runs again through the whole chain and
// consumes the approval here, if it still matches the tool version, the
// principal and the arguments.
func (inv *Invoker) approve(next Step) Step {
	return func(ctx context.Context, c *call) ToolResult {
		if c.preApproved {
			// A step of an approved composite: the approval covers it, and
			// the steps below it if it is a composite too.
			c.approvedRun = true
			return next(ctx, c)
		}
		needs := c.def.Security.Level == tooldef.LevelDangerous || c.def.Security.RequireConfirm ||
			(c.def.Runner.Kind == tooldef.RunnerComposite && inv.stepsNeedApproval(ctx, c.def, c.depth+1))
		if !needs {
			return next(ctx, c)
		}
		hash := argsHash(c.args)
		if c.approval != "" {
			a, err := inv.store.ApprovalByID(ctx, c.approval)
			if err != nil || a.VersionID != c.version || a.ArgsHash != hash || a.PrincipalID != principalID(c.caller) {
				return refusal(models.CodeConfirmationRequired, "the approval does not match this call", "Call the tool again to ask for a new approval.")
			}
			if ok, err := inv.store.UseApproval(ctx, a.ID); err != nil || !ok {
				return refusal(models.CodeConfirmationRequired, "the approval was already used or is not approved", "Call the tool again to ask for a new approval.")
			}
			c.approvedRun = true
			return next(ctx, c)
		}
		return inv.park(ctx, c, hash)
	}
}

// ApprovalTTL is how long a reviewer has to decide.
const ApprovalTTL = 15 * time.Minute

// park stores the call as awaiting approval, with a pending approval.
func (inv *Invoker) park(ctx context.Context, c *call, hash string) ToolResult {
	now := time.Now().UTC()
	a := &models.Approval{
		ID: models.NewID(), CallID: c.id, Tool: c.def.Name, Version: c.def.Version, VersionID: c.version,
		PrincipalID: principalID(c.caller), ArgsHash: hash, Arguments: string(inv.redactor.RedactJSON(c.req.Arguments)),
		Status: models.ApprovalPending, ExpiresAt: now.Add(ApprovalTTL),
	}
	res := ToolResult{CallID: c.id, Status: models.StatusAwaitingApproval, Error: &ToolError{
		Code:       models.CodeConfirmationRequired,
		Message:    fmt.Sprintf("%s needs a reviewer's approval for this call", c.def.Name),
		Retryable:  true,
		Suggestion: fmt.Sprintf("Tell the user the call waits for approval (it expires at %s). %s for the result.", a.ExpiresAt.Format(time.RFC3339), models.DirectionsOf(ctx).PollCall(c.id)),
	}, Metadata: CallMetadata{ToolVersion: c.def.Version}}
	res.Data, _ = json.Marshal(map[string]string{"approval_id": a.ID})
	rec, _ := inv.callRecord(c, res)
	rec.Request = inv.requestJSON(c)
	rec.Arguments, rec.Prepared = a.Arguments, true
	if err := inv.store.CreateApproval(ctx, a, rec); err != nil {
		inv.log.ErrorContext(ctx, "park call for approval", "err", err, "call_id", c.id)
		return failure(models.CodeInternal, "internal error", true, "Try again.")
	}
	c.waiting = true
	inv.log.InfoContext(ctx, "call awaits approval", "call_id", c.id, "approval_id", a.ID, "tool", c.def.Name)
	return res
}

func argsHash(args map[string]any) string {
	canon, _ := json.Marshal(args)
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

func principalID(p *models.Principal) uint {
	if p == nil {
		return 0
	}
	return p.ID
}

// secure confines file paths to the session work directory and the tool's
// allowedPaths before anything runs.
func (inv *Invoker) secure(next Step) Step {
	return func(ctx context.Context, c *call) ToolResult {
		// Work directories belong to a principal and a session: two agents
		// using the same session id never share files.
		dir, err := inv.runners.WorkDir(principalID(c.caller), c.req.SessionID)
		if err != nil {
			inv.log.ErrorContext(ctx, "make work directory", "err", err, "call_id", c.id)
			return failure(models.CodeInternal, "internal error", true, "Try again.")
		}
		c.dir = dir
		if cmd, ok := c.args["command"].(string); ok && c.def.Category == "shell" {
			if msg := checkCommand(cmd, c.def.Security.ShellOperators); msg != "" {
				return refusal(models.CodeCommandRejected, msg,
					"Send one plain command with its arguments; run the steps as separate calls instead of chaining, piping or redirecting.")
			}
		}
		if u, ok := c.args["url"].(string); ok {
			if msg := inv.net.CheckURL(u); msg != "" {
				return refusal(models.CodeURLNotAllowed, msg, "Use a public http or https URL; internal addresses are never fetched.")
			}
		}
		if c.def.Category != "filesystem" && !isFileBuiltin(c.def) {
			return next(ctx, c)
		}
		if p, ok := c.args["path"].(string); ok {
			if msg := checkPath(p, c.def.Security.AllowedPaths); msg != "" {
				return refusal(models.CodePathNotAllowed, msg,
					"Use a path relative to the session work directory, inside "+strings.Join(allowedOrDot(c.def.Security.AllowedPaths), ", ")+", without \"..\".")
			}
		}
		return next(ctx, c)
	}
}

// isFileBuiltin reports whether the tool runs one of the file built-ins,
// whatever its category.
func isFileBuiltin(def tooldef.Definition) bool {
	return def.Runner.Kind == tooldef.RunnerBuiltin && strings.HasPrefix(def.Runner.Builtin, "file_")
}

func allowedOrDot(paths []string) []string {
	if len(paths) == 0 {
		return []string{"."}
	}
	return paths
}

// checkPath says why a path may not be used, or "" when it may: it must be
// relative, free of NUL and "..", and inside one of the allowed roots.
// os.Root enforces the same at run time, symlinks included.
func checkPath(p string, allowed []string) string {
	switch {
	case p == "":
		return "path is empty"
	case strings.ContainsRune(p, 0):
		return "path contains a NUL byte"
	case filepath.IsAbs(p) || strings.HasPrefix(p, `\`) || (len(p) > 1 && p[1] == ':'):
		return fmt.Sprintf("path %q is absolute", p)
	}
	parts := strings.Split(strings.ReplaceAll(p, `\`, "/"), "/")
	if slices.Contains(parts, "..") {
		return fmt.Sprintf("path %q leaves the work directory", p)
	}
	clean := filepath.Clean(strings.ReplaceAll(p, `\`, "/"))
	for _, root := range allowedOrDot(allowed) {
		root = filepath.Clean(root)
		if root == "." || clean == root || strings.HasPrefix(clean, root+string(filepath.Separator)) {
			return ""
		}
	}
	return fmt.Sprintf("path %q is outside the tool's allowed paths", p)
}

// cache answers a cacheable call from an earlier identical one (same tool
// version, same canonical arguments; for file tools, the same session
// work directory) within the tool's TTL.
func (inv *Invoker) cache(next Step) Step {
	return func(ctx context.Context, c *call) ToolResult {
		if !c.def.Execution.Cacheable {
			return next(ctx, c)
		}
		key := inv.cacheKey(c, c.args)
		hit, ok := c.hit, c.hit != nil // found by validate
		if !ok {
			hit, ok = inv.results.Get(key)
		}
		ok = ok && time.Now().Before(hit.expires)
		inv.metrics.CacheLookup(ok)
		if ok {
			c.cached = true
			c.redactedArgs = hit.redactedArgs(inv.redactor, c.args)
			return hit.result
		}
		res := next(ctx, c)
		if res.Success {
			if data, ok := encodedData(res.Data); ok { // once, for every hit
				res.Data, res.dataEncoded = data, true
			}
			inv.results.Add(key, &cachedResult{result: res, expires: time.Now().Add(time.Duration(c.def.Execution.CacheTTL) * time.Millisecond)})
		}
		return res
	}
}

// cacheKey is the results cache's key of a call with these arguments:
// version:sha256(canonical arguments)[:p<principal>:<session>] for file
// tools. It is made once per call (validate and cache both ask).
func (inv *Invoker) cacheKey(c *call, args map[string]any) string {
	if c.cacheKey != "" {
		return c.cacheKey
	}
	var buf [160]byte
	k := strconv.AppendUint(buf[:0], uint64(c.version), 10)
	k = append(append(k, ':'), argsHash(args)...)
	if c.def.Category == "filesystem" || isFileBuiltin(c.def) {
		k = strconv.AppendUint(append(k, ":p"...), uint64(principalID(c.caller)), 10)
		k = append(append(k, ':'), c.req.SessionID...)
	}
	c.cacheKey = string(k)
	return c.cacheKey
}

// newSchemaCache keeps compiled parameter schemas by version id.
func newSchemaCache() *expirable.LRU[uint, *jsonschema.Schema] {
	return expirable.NewLRU[uint, *jsonschema.Schema](4096, nil, time.Hour)
}

// newResultsCache holds up to 8192 results; each also carries its own
// expiry from the tool's cacheTTL.
func newResultsCache() *expirable.LRU[string, *cachedResult] {
	return expirable.NewLRU[string, *cachedResult](8192, nil, tooldef.MaxCacheTTLMs*time.Millisecond)
}

// cachedResult is a successful result and when it stops being served.
type cachedResult struct {
	result  ToolResult
	expires time.Time
	// The hits' arguments are the same canonical JSON: they are redacted
	// once for all the history records of the hits.
	argsOnce sync.Once
	args     string
}

func (h *cachedResult) redactedArgs(r *redact.Redactor, args map[string]any) string {
	h.argsOnce.Do(func() {
		raw, _ := json.Marshal(args)
		h.args = string(r.RedactJSON(raw))
	})
	return h.args
}

// execute runs the tool, retrying retryable failures of retryable tools
// with exponential backoff.
func (inv *Invoker) execute(ctx context.Context, c *call) ToolResult {
	retries := 0
	if c.def.Execution.Retryable {
		retries = c.def.Execution.MaxRetries
	}
	c.log = inv.toolLogger(c)
	start := time.Now()
	res, n := withRetries(ctx, retries, inv.sleep, func() ToolResult {
		c.attempts++
		res := inv.attempt(ctx, c)
		if res.Error != nil {
			c.log.InfoContext(ctx, "tool attempt failed", "attempt", c.attempts, "code", res.Error.Code, "retryable", res.Error.Retryable)
		}
		return res
	})
	c.attempts, c.runMs = n, time.Since(start).Milliseconds()
	return res
}

// toolLogger is the logger a tool writes to: every line carries the call
// id, the tool and the session.
func (inv *Invoker) toolLogger(c *call) *slog.Logger {
	log := inv.log
	if log == nil {
		log = slog.Default()
	}
	return log.With("call_id", c.id, "tool", c.def.Name, "session_id", c.req.SessionID)
}

// attempt runs the tool once within its timeout.
func (inv *Invoker) attempt(ctx context.Context, c *call) ToolResult {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(c.def.Execution.Timeout)*time.Millisecond)
	defer cancel()
	c.emit = func(event string, data any) { inv.events.publish(c.id, event, data) }
	c.emit("attempt", map[string]int{"attempt": c.attempts})
	if c.def.Runner.Kind == tooldef.RunnerComposite {
		return inv.composite(ctx, c)
	}
	data, err := inv.runners.Run(ctx, &runners.Call{ID: c.id, Def: c.def, Args: c.args, Dir: c.dir, Log: c.log})
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return failure(models.CodeTimeout, fmt.Sprintf("%s did not finish within %d ms", c.def.Name, c.def.Execution.Timeout), true, "Retry with a smaller input, or later.")
		}
		return failure(models.CodeCancelled, "the call was cancelled", false, "")
	}
	if err != nil {
		var te *runners.Error
		if errors.As(err, &te) {
			return failure(te.Code, inv.redactor.Redact(te.Message), te.Retryable, te.Suggestion)
		}
		return failure(models.CodeExecutionFailed, inv.redactor.Redact(err.Error()), false, "Check the arguments and try again.")
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return failure(models.CodeInternal, "internal error", false, "")
	}
	// Output is redacted here, before the cache, the history or the caller
	// can see it.
	return ToolResult{Status: models.StatusSucceeded, Success: true, Data: inv.redactor.RedactJSON(raw)}
}

// MaxResultRecord caps the result kept in history.
const MaxResultRecord = 64 << 10

// record stores the call in history with its arguments redacted and its
// (already redacted) result.
//
// It returns the result's JSON when the record holds all of it, the
// record, and the channel that receives the result of its write.
func (inv *Invoker) record(ctx context.Context, c *call, res ToolResult) ([]byte, *models.Call, <-chan error) {
	rec, encoded := inv.callRecord(c, res)
	if res.Status == models.StatusQueued || res.Status == models.StatusRunning {
		rec.Request = inv.requestJSON(c)
		rec.FinishedAt = nil
	}
	committed := inv.calls.save(ctx, rec)
	inv.events.publish(c.id, "status", statusEvent{res.Status})
	if models.Terminal(res.Status) {
		inv.events.publish(c.id, "result", res)
	}
	return encoded, rec, committed
}

// statusEvent is the data of a status event.
type statusEvent struct {
	Status string `json:"status"`
}

// CallAcknowledged runs a call for someone who is answered with it (the
// API, MCP, the console) and returns once its record survives a crash
// (journaled, or else committed to the database), so every call answered
// is kept; the call itself never waits for that. A call that ran is
// answered even if its record could not be made durable (that is
// logged); one accepted for later (queued, awaiting approval) is not: the
// error says so.
func (inv *Invoker) CallAcknowledged(ctx context.Context, caller *models.Principal, req CallRequest) (ToolResult, error) {
	res := inv.Call(ctx, caller, req)
	return res, inv.acknowledge(ctx, res)
}

// acknowledge returns once the record of res survives a crash; its error
// is for a call accepted for later only (see CallAcknowledged).
func (inv *Invoker) acknowledge(ctx context.Context, res ToolResult) error {
	if res.committed == nil {
		return nil
	}
	if err := inv.calls.durable(ctx, res.record, res.committed); err != nil {
		if res.Status == models.StatusAwaitingApproval || res.Status == models.StatusQueued {
			return fmt.Errorf("record call %s: %w", res.CallID, err)
		}
		inv.log.ErrorContext(ctx, "call answered but not recorded", "call_id", res.CallID, "err", err)
	}
	return nil
}

// callRecord is the history row of a call and its result; a result over
// MaxResultRecord keeps its status and error but not its data.
func (inv *Invoker) callRecord(c *call, res ToolResult) (*models.Call, []byte) {
	// The decoded arguments re-encoded (canonical, no escapes) when the
	// call got that far; the bytes as sent otherwise.
	args := c.req.Arguments
	switch {
	case c.redactedArgs != "":
		args = json.RawMessage(c.redactedArgs)
	case c.args != nil:
		args, _ = json.Marshal(c.args)
	case len(bytes.TrimSpace(args)) == 0:
		args = json.RawMessage(`{}`)
	}
	// The recorder redacts the arguments before the record is read or
	// stored, off the call path.
	argsJSON := []byte(args)
	if len(argsJSON) > MaxResultRecord {
		argsJSON = []byte(`{"truncated":true}`)
	}
	res.encoded = nil // encode this result, not an earlier one
	resJSON := res.JSON()
	encoded := resJSON
	if len(resJSON) > MaxResultRecord {
		summary := res
		summary.Data = json.RawMessage(`{"truncated":true}`)
		resJSON, encoded = summary.JSON(), nil
	}
	now := time.Now().UTC()
	rec := &models.Call{
		ID: c.id, SessionID: c.req.SessionID, Tool: c.req.Tool, Version: c.def.Version,
		Arguments: string(argsJSON), Status: res.Status, Result: string(resJSON),
		Attempts: c.attempts, Cached: c.cached, QueueMs: c.queueMs, RunMs: c.runMs, TotalMs: time.Since(c.started).Milliseconds(),
		CreatedAt: c.started.UTC(), FinishedAt: &now, PrincipalID: principalID(c.caller), ParentID: c.parent,
	}
	if c.redactedArgs != "" {
		rec.Prepared = true
	}
	if !c.created.IsZero() {
		rec.CreatedAt = c.created
		rec.TotalMs = time.Since(c.created).Milliseconds()
	}
	if res.Status == models.StatusAwaitingApproval {
		rec.FinishedAt = nil
	}
	if res.Error != nil {
		rec.ErrorCode = res.Error.Code
	}
	return rec, encoded
}

// requestJSON is the call as sent, kept while it waits so it can run later.
func (inv *Invoker) requestJSON(c *call) string {
	raw, _ := json.Marshal(c.req)
	return string(raw)
}

// CallRecord returns a call of the history; an agent sees only its own.
func (inv *Invoker) CallRecord(ctx context.Context, caller *models.Principal, id string) (*models.Call, error) {
	rec, err := inv.calls.byID(ctx, id)
	if err != nil {
		return nil, err
	}
	if caller != nil && caller.Role == access.RoleAgent && rec.PrincipalID != caller.ID {
		return nil, models.ErrNotFound.Errorf("call %q", id)
	}
	return rec, nil
}

// History returns one page of calls; an agent sees only its own.
func (inv *Invoker) History(ctx context.Context, caller *models.Principal, f models.CallFilter) ([]models.Call, int64, error) {
	if f.Limit < 1 || f.Limit > 1000 {
		return nil, 0, models.ErrInvalid.Errorf("limit must be between 1 and 1000")
	}
	if f.Offset < 0 {
		return nil, 0, models.ErrInvalid.Errorf("offset must not be negative")
	}
	if caller != nil && caller.Role == access.RoleAgent {
		f.PrincipalID = caller.ID
	}
	inv.calls.sync()
	return inv.store.Calls(ctx, f)
}
