// Package invoke is the invoke stage: the Invoker takes a call from any
// transport (REST, MCP, the console), passes it through the guard chain
// (chain.go lists it; one file a guard), hands what passes to the runners,
// and records every call. It also runs calls in the background (async and
// approved ones), keeps the call journal, streams call events, and runs
// composite tools step by step through the same chain.
package invoke

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/callbacks"
	"toolbelt/services/netpolicy"
	"toolbelt/services/ops"
	"toolbelt/services/redact"
	"toolbelt/services/runners"
	"toolbelt/services/selection"
)

// Invoker is the invoke stage: every call passes the guard chain
// (chain.go), what passes runs on the runners, and every call is recorded.
type Invoker struct {
	store     *models.Store
	selector  *selection.Selector
	authz     *access.Authz
	log       *slog.Logger
	schemas   *expirable.LRU[uint, *compiledParams]
	validated *expirable.LRU[string, struct{}] // validate's memo of arguments that passed
	results   *expirable.LRU[string, *cachedResult]
	shared    *sharedResults // the results cache in Redis (nil: none)
	limits    *rateLimits
	queues    *queues
	// stageNames are the timed guards' names in the chain's order (set
	// when the chain is composed), the names of a call's stages.
	stageNames []string
	sleep      func(context.Context, time.Duration) error
	redactor   *redact.Redactor
	net        netpolicy.Policy
	bg         *background
	calls      *callRecorder
	tools      sync.Map     // name → *resolvedTool, the current versions
	running    sync.Map     // call id → context.CancelFunc of a call in flight
	inFlight   atomic.Int64 // calls being handled (Call) or run in the background
	// interrupting is set when Shutdown's deadline passed: calls
	// cancelled from then on are recorded as interrupted.
	interrupting atomic.Bool
	events       *broker
	metrics      *ops.Metrics
	run          step
	// runners execute what passed the chain.
	runners *runners.Table
	// callbacks deliver the results of calls answered 202 that name a
	// callback_url (nil: such calls are refused).
	callbacks *callbacks.Deliverer
	// instance names this instance and owner this run of it, which claims
	// background calls (claims.go); bus carries messages to the other
	// instances (nil: none); watches are the other instances' streams of
	// calls; claimed counts the calls this run holds; lease and
	// claimsEvery time the claims.
	instance, owner string
	bus             Bus
	watches         watches
	claimed         atomic.Int64
	lease           time.Duration
	claimsEvery     time.Duration
}

// WithSleep replaces the wait between retries (tests pass a fake clock so
// they never sleep).
func (inv *Invoker) WithSleep(sleep func(context.Context, time.Duration) error) *Invoker {
	inv.sleep = sleep
	return inv
}

// NewInvoker returns the invoker: calls that pass its chain run on exec's
// runners, the call journal lives under dataDir (SQLite; see journalFor), and queueLimits
// overrides DefaultQueueLimits per category.
func NewInvoker(store *models.Store, selector *selection.Selector, authz *access.Authz, redactor *redact.Redactor, exec *runners.Table, dataDir string, queueLimits map[string]int, log *slog.Logger) *Invoker {
	inv := &Invoker{
		store: store, selector: selector, authz: authz, redactor: redactor, log: log,
		net: exec.NetPolicy(), runners: exec,
		schemas: newSchemaCache(), validated: newValidatedMemo(),
		results: newResultsCache(),
		limits:  newRateLimits(),
		queues:  newQueues(queueLimits, 0),
		sleep:   sleepCtx,
		bg:      newBackground(),
		events:  newBroker(),
		calls: newCallRecorder(store, func(c *models.Call) { c.Arguments = string(redactor.RedactJSON([]byte(c.Arguments))) },
			journalFor(store, dataDir, log), log),
	}
	if store.Shared() {
		inv.calls.leftover = leftoverJournal(dataDir, log)
	}
	inv.run = inv.chain()(inv.execute)
	inv.lease, inv.claimsEvery = Lease, ClaimsEvery
	return inv.WithCluster("toolbelt", nil)
}

// WithClaimTimes replaces Lease and ClaimsEvery (tests).
func (inv *Invoker) WithClaimTimes(lease, every time.Duration) *Invoker {
	inv.lease, inv.claimsEvery = lease, every
	return inv
}

// Flush waits until every call record queued so far is written.
func (inv *Invoker) Flush() { inv.calls.sync() }

// WithMetrics makes the invoker report to m.
func (inv *Invoker) WithMetrics(m *ops.Metrics) *Invoker {
	inv.metrics = m
	return inv
}

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

// finish completes a result's metadata, records the call, and teaches the
// selection index from a success.
func (inv *Invoker) finish(ctx context.Context, c *call, res ToolResult) ToolResult {
	if (ctx.Err() != nil || c.stopped) && inv.interrupting.Load() && !res.Success {
		if c.claimed && !c.began && inv.release(c) {
			return res // queued again: another instance, or the next start, runs it
		}
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
	if c.lost {
		return res // another instance took it over: its end is recorded there
	}
	res.encoded, res.record, res.committed = inv.record(ctx, c, res)
	if c.tracked && c.req.CallbackURL != "" && models.Terminal(res.Status) {
		inv.callEnded(ctx, c.id, []byte(res.record.Result))
	}
	if inv.selector != nil {
		// Every call after a selection measures it (was the tool offered,
		// at which rank, does it exist?); a successful one teaches it.
		name, known := c.def.Name, c.def.Name != ""
		if !known {
			name = c.req.Tool
		}
		inv.selector.ObserveCallLater(c.req.SessionID, name, res.CallID, known, res.Success && !c.cached)
	}
	return res
}

// precheck runs the guards that need no approval and change nothing.
func (inv *Invoker) precheck(ctx context.Context, c *call) ToolResult {
	if !ValidSessionID(c.req.SessionID) {
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
	if !ValidSessionID(c.req.SessionID) {
		return refusal(models.CodeValidation, SessionIDRule, "Send a session_id such as \"run-42\".")
	}
	return inv.run(ctx, c)
}

func principalID(p *models.Principal) uint {
	if p == nil {
		return 0
	}
	return p.ID
}
