// Package invoke is the invoke stage: the Invoker takes a call from any
// transport (REST, MCP, the console), passes it through the guard chain
// (chain.go lists it; one file a guard), hands what passes to the runners,
// and records every call. It also runs calls in the background (async and
// approved ones), keeps the call journal, streams call events, and runs
// composite tools step by step through the same chain.
package invoke

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	"golang.org/x/sync/errgroup"

	"toolbelt/internal/ttlcache"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/callbacks"
	"toolbelt/services/cluster"
	"toolbelt/services/netpolicy"
	"toolbelt/services/ops"
	"toolbelt/services/redact"
	"toolbelt/services/runners"
	"toolbelt/services/selection"
)

// Invoker is the invoke stage: every call passes the guard chain
// (chain.go), what passes runs on the runners, and every call is recorded.
type Invoker struct {
	store    *models.Store
	selector *selection.Selector
	authz    *access.Authz
	redactor *redact.Redactor
	// runners execute what passed the chain.
	runners *runners.Table
	net     netpolicy.Policy
	metrics *ops.Metrics
	log     *slog.Logger

	pipeline  pipeline
	memo      memos
	admission admission
	flight    flight
	recording recording
	cluster   clusterState
}

// pipeline is the composed guard chain and the clocks it keeps.
type pipeline struct {
	run step
	// stageNames are the timed guards' names in the chain's order (set
	// when the chain is composed), the names of a call's stages.
	stageNames []string
	// now is the clock the chain times its stages with (nil: time.Now;
	// tests pass one that moves only when they say).
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
}

// memos are what the guards keep between calls: the tools resolved, the
// schemas compiled, the arguments validated and the results cached.
type memos struct {
	tools     sync.Map // name → *resolvedTool, the current versions
	stale     sync.Map // name → *resolvedTool, the versions before the last catalog change
	schemas   *ttlcache.Cache[uint, *compiledParams]
	validated *ttlcache.Cache[string, struct{}] // validate's memo of arguments that passed
	results   *ttlcache.Cache[string, *cachedResult]
	shared    *sharedResults // the results cache in Redis (nil: none)
}

// admission is what holds calls back: the tools' rate limits, the
// category queues and the cap on calls waiting for approval.
type admission struct {
	limits *rateLimits
	queues *queues
	// maxPending caps each principal's calls waiting for approval.
	maxPending int
}

// flight is the calls in flight: those Shutdown waits for and cancels.
type flight struct {
	running sync.Map     // call id → context.CancelFunc of a call in flight
	count   atomic.Int64 // calls being handled (Call) or run in the background
	// interrupting is set when Shutdown's deadline passed: calls
	// cancelled from then on are recorded as interrupted.
	interrupting atomic.Bool
	bg           *background
}

// recording is where a call's record and its news go: the call
// records, the events of calls followed, and the callbacks of calls
// answered 202.
type recording struct {
	calls  *callRecorder
	events *broker
	// callbacks deliver the results of calls answered 202 that name a
	// callback_url (nil: such calls are refused).
	callbacks *callbacks.Deliverer
}

// clusterState is this instance among the others: instance names this
// instance and owner this run of it, which claims background calls
// (claims.go); bus carries messages to the other instances (nil: none);
// watches are the other instances' streams of calls; claimed counts the
// calls this run holds; lease and claimsEvery time the claims.
type clusterState struct {
	instance, owner string
	bus             Bus
	watches         watches
	claimed         atomic.Int64
	// storeFailed is when (Unix ns) the claims loop last found the
	// database unreachable: takeovers wait a lease after it.
	storeFailed atomic.Int64
	lease       time.Duration
	claimsEvery time.Duration
}

// Deps is what an Invoker works with. Store, Selector, Authz, Redactor,
// Runners and Log are needed; the rest may be left zero.
type Deps struct {
	Store    *models.Store
	Selector *selection.Selector
	Authz    *access.Authz
	Redactor *redact.Redactor
	// Runners execute what passed the chain.
	Runners *runners.Table
	// DataDir holds the call journal (see callJournal).
	DataDir string
	// QueueLimits overrides DefaultQueueLimits per category.
	QueueLimits map[string]int
	// QueueWaiting and QueueWaitingEach bound the calls waiting per
	// category, and those of one principal among them; zero:
	// DefaultQueueWaiting and DefaultQueueWaitingEach.
	QueueWaiting, QueueWaitingEach int
	Log                            *slog.Logger
	// Metrics, when set, is reported to (ReportQueues and
	// ReportPendingApprovals too).
	Metrics *ops.Metrics
	// Callbacks deliver the results of calls answered 202 (async, or
	// waiting for approval) that name a callback_url; nil: such calls are
	// refused.
	Callbacks *callbacks.Deliverer
	// SharedResults keeps cacheable results in Redis too, under the same
	// keys, so a result computed on one instance is a hit on every other
	// (cache.go); nil: this process's memory only.
	SharedResults *redis.Client
	// RateLimits counts calls against security.rateLimit; nil: this
	// process's memory.
	RateLimits limiter.Store
	// SharedQueues makes the category queues those every instance uses:
	// a category's limit and waiting bound hold in the cluster; nil: this
	// process's queues.
	SharedQueues *cluster.Queues
	// Instance names this instance (default "toolbelt"); Bus carries
	// messages to the others (nil: none to hear). See joinCluster.
	Instance string
	Bus      Bus
	// Sleep is the wait between retries (tests pass a fake clock); nil:
	// a real wait.
	Sleep func(context.Context, time.Duration) error
	// Lease and ClaimsEvery time the claims of background calls; zero:
	// the package's Lease and ClaimsEvery.
	Lease, ClaimsEvery time.Duration
	// MaxPendingApprovals caps the calls one principal may have waiting
	// for a reviewer, in the cluster; 0: no cap.
	MaxPendingApprovals int
}

// New returns the invoker. It starts nothing: Run runs its loops. An
// invoker that never runs still answers calls, writing each record
// itself, and runs background calls; Close waits for them.
func New(d Deps) *Invoker {
	inv := &Invoker{
		store: d.Store, selector: d.Selector, authz: d.Authz, redactor: d.Redactor, log: d.Log,
		net: d.Runners.NetPolicy(), runners: d.Runners, metrics: d.Metrics,
		pipeline: pipeline{sleep: d.Sleep},
		memo:     memos{schemas: newSchemaCache(), validated: newValidatedMemo(), results: newResultsCache()},
		admission: admission{
			limits:     newRateLimits(d.RateLimits),
			queues:     newQueues(d.QueueLimits, d.QueueWaiting, d.QueueWaitingEach),
			maxPending: d.MaxPendingApprovals,
		},
		flight: flight{bg: newBackground()},
		recording: recording{
			events:    newBroker(),
			callbacks: d.Callbacks,
			calls: newCallRecorder(d.Store, func(c *models.Call) { c.Arguments = string(d.Redactor.RedactJSON([]byte(c.Arguments))) },
				openCallJournal(d.DataDir, d.Log), d.Log),
		},
		cluster: clusterState{lease: cmp.Or(d.Lease, Lease), claimsEvery: cmp.Or(d.ClaimsEvery, ClaimsEvery)},
	}
	if inv.pipeline.sleep == nil {
		inv.pipeline.sleep = sleepCtx
	}
	if d.SharedResults != nil {
		inv.memo.shared = &sharedResults{client: d.SharedResults, log: d.Log}
	}
	inv.admission.queues.shared = d.SharedQueues
	// On a database several instances share, the journal only spools.
	inv.recording.calls.answers = inv.recording.calls.journal != nil && !d.Store.Shared()
	inv.pipeline.run = inv.chain()(inv.execute)
	inv.joinCluster(cmp.Or(d.Instance, "toolbelt"), d.Bus)
	if d.Metrics != nil {
		inv.ReportQueues(d.Metrics)
		inv.ReportPendingApprovals(d.Metrics)
	}
	return inv
}

// Run runs the invoker's loops until ctx ends: the call recorder's
// writer with the upkeep of its journal, and the claims of background
// calls (runClaims). Then the records queued are written, and records
// are written by whoever makes them. The background calls are not its:
// Shutdown and Close end them.
func (inv *Invoker) Run(ctx context.Context) error {
	var g errgroup.Group
	g.Go(func() error { inv.runClaims(ctx); return nil })
	g.Go(func() error { return inv.recording.calls.run(ctx) })
	return g.Wait()
}

// Flush waits until every call record queued so far is written.
func (inv *Invoker) Flush() { inv.recording.calls.sync() }

// Call runs one tool call through the chain and records it.
func (inv *Invoker) Call(ctx context.Context, caller *models.Principal, req CallRequest) ToolResult {
	// In flight until recorded: Shutdown waits for it (one atomic add; the
	// call becomes cancellable only if it runs, in cancellable).
	inv.flight.count.Add(1)
	defer inv.flight.count.Add(-1)
	c := &call{id: models.NewID(), req: req, caller: caller, timing: callTiming{started: time.Now()}}
	if c.req.SubjectToken == "" {
		// The caller's token for token exchange, as its authentication
		// left it on ctx (runners.WithSubjectToken); kept in memory only.
		c.req.SubjectToken = runners.SubjectTokenOf(ctx)
	}
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
	if (ctx.Err() != nil || c.life.stopped) && inv.flight.interrupting.Load() && !res.Success {
		switch {
		case c.life.claimed && !c.life.began && inv.release(c):
			return res // queued again: another instance, or the next start, runs it
		case !c.life.claimed && !c.life.began:
			res = stoppedBeforeBegin() // it waited for a slot: nothing ran
		default:
			res = interrupted()
		}
	}
	res.CallID = c.id
	took := time.Since(c.timing.started)
	res.Metadata.Duration = took.Milliseconds()
	res.Metadata.Cached = c.outcome.cached
	res.Metadata.Attempts = c.timing.attempts
	if c.def.Version != "" {
		res.Metadata.ToolVersion = c.def.Version
	}
	tool := c.def.Name
	if tool == "" {
		tool = "unknown" // never a name an agent made up: labels stay bounded
	}
	inv.metrics.Call(tool, res.Status, took)
	if c.review.waiting {
		return res // parked for approval: recorded with its approval
	}
	if c.life.lost {
		return res // another instance took it over: its end is recorded there
	}
	res.encoded, res.record, res.committed = inv.record(ctx, c, res)
	if c.life.tracked && c.req.CallbackURL != "" && models.Terminal(res.Status) {
		inv.callEnded(ctx, c.id, []byte(res.record.Result))
	}
	if inv.selector != nil {
		// Every call after a selection measures it (was the tool offered,
		// at which rank, does it exist?); a successful one teaches it.
		name, known := c.def.Name, c.def.Name != ""
		if !known {
			name = c.req.Tool
		}
		inv.selector.ObserveCallLater(c.req.SessionID, name, res.CallID, known, res.Success && !c.outcome.cached)
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
	return inv.pipeline.run(ctx, c)
}

func principalID(p *models.Principal) uint {
	if p == nil {
		return 0
	}
	return p.ID
}
