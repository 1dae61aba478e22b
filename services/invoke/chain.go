package invoke

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"toolbelt/models"
	"toolbelt/services/runners"
	"toolbelt/services/tooldef"
)

// call is one call moving through the guard chain: the request, who
// asked, the tool and arguments resolve and validate settled, then its
// parts, which the guards fill in as the call passes them.
type call struct {
	id      string
	req     CallRequest
	caller  *models.Principal
	def     tooldef.Definition
	version uint // version id
	schema  *jsonschema.Schema
	args    map[string]any
	// dir is the session's work directory, made by the secure guard.
	dir runners.WorkDir
	// emit streams a tool's progress to the call's event subscribers.
	emit func(event string, data any)
	// log is the tool's logger, carrying the call id.
	log *slog.Logger

	lineage callLineage
	review  callReview
	timing  callTiming
	outcome callOutcome
	life    callLifecycle
}

// callLineage places a step of a composite call: parent is the composite
// call's id, up the composite call itself, depth how deep it nests.
type callLineage struct {
	parent string
	up     *call
	depth  int
}

// callReview is what a reviewer decided for the call.
type callReview struct {
	// id is the approval this run may consume (a call resumed after a
	// reviewer approved it).
	id string
	// waiting is set when the call was parked for approval.
	waiting bool
	// preApproved says the composite this call is a step of was
	// approved by a reviewer, which covers its steps; approvedRun is set
	// on a call that consumed an approval or is covered by one (its own
	// steps are then covered too).
	preApproved bool
	approvedRun bool
}

// callTiming is when the call happened and where its time went.
type callTiming struct {
	started time.Time
	// created is when the call was first received (a resumed call keeps
	// it); runMs is the time spent executing.
	created time.Time
	runMs   int64
	// queueMs is the time spent waiting for a slot in the category queue.
	queueMs int64
	// span is, per timed guard of the chain, the time spent in it and the
	// steps after it; the one after the last guard's, the execution's (for
	// the guard timings).
	span [maxTimedGuards + 1]time.Duration
	// self is, per timed guard, the time spent in the guard itself; the
	// one after the last guard's, the execution's (the call's stages).
	self [maxTimedGuards + 1]time.Duration
	ran  uint32 // bit i: timed guard i ran (bit timed: the execution)
	// tries are the execution's attempts, for the call's stages.
	tries    []try
	attempts int
}

// callOutcome is what the call's run left for its record.
type callOutcome struct {
	cached bool
	// actedAs says as whom the tool acted at an upstream (runners.Call).
	actedAs string
	// redactedArgs, when set, are the arguments already redacted for the
	// history (a cache hit reuses the first hit's).
	redactedArgs string
	// cacheKey is the results cache's key, once made (cacheable tools).
	cacheKey string
}

// callLifecycle marks where the call stands between instances and
// cancellations.
type callLifecycle struct {
	// tracked marks a call made cancellable before the chain (a
	// background call); stopped, a call whose context was cancelled while
	// it ran.
	tracked, stopped bool
	// claimed marks a background call this instance claimed (claims.go);
	// lost, one another instance took over before its tool began: it is
	// not run, and its end is not recorded here.
	claimed, lost bool
	// began marks a call whose tool began (its start recorded: start for
	// a claimed call, begin for a synchronous one).
	began bool
}

// step handles a call and returns its result; guard wraps a step with one
// check that may end the call early.
type (
	step  func(ctx context.Context, c *call) ToolResult
	guard func(next step) step
)

// chain is the guard chain, in order: every call passes it before it
// runs, and any guard may end the call with its own result. One file a
// guard, named as here. Each guard is timed on its own, except
// cancellable, which only makes the call cancellable by id.
func (inv *Invoker) chain() func(step) step {
	return inv.timedChain(
		namedGuard{"resolve", inv.resolve},     // the tool and version (resolve.go)
		namedGuard{"validate", inv.validate},   // the arguments against the schema (validate.go)
		namedGuard{"authorize", inv.authorize}, // the caller's role and grants (authorize.go)
		namedGuard{"approve", inv.approve},     // a reviewer's approval when the tool needs one (approve.go)
		namedGuard{"secure", inv.secure},       // paths, commands, URLs; the session's work directory (secure.go)
		namedGuard{"cache", inv.cache},         // an earlier identical result (cache.go)
		namedGuard{"", inv.cancellable},        // cancellable by id from here on (cancellable.go)
		namedGuard{"limit", inv.limit},         // the tool's rate limit (limit.go)
		namedGuard{"queue", inv.queue},         // a slot of the category's queue (queue.go)
	) // then execute (execute.go): runners, timeout, retries
}

// namedGuard is a guard of the chain and the name its timing carries
// ("" for a guard that is not timed).
type namedGuard struct {
	name string
	wrap guard
}

// timedChain composes the guards, the first outermost, timing each named
// one under its name; the indexes of their timings follow the order.
func (inv *Invoker) timedChain(guards ...namedGuard) func(step) step {
	timed := 0
	for _, g := range guards {
		if g.name != "" {
			timed++
		}
	}
	if timed > maxTimedGuards {
		panic(fmt.Sprintf("the chain has %d timed guards; call.span holds %d", timed, maxTimedGuards))
	}
	inv.pipeline.stageNames = inv.pipeline.stageNames[:0]
	for _, g := range guards {
		if g.name != "" {
			inv.pipeline.stageNames = append(inv.pipeline.stageNames, g.name)
		}
	}
	composed := make([]guard, 0, len(guards))
	i := 0
	for _, g := range guards {
		if g.name == "" {
			composed = append(composed, g.wrap)
			continue
		}
		composed = append(composed, inv.timed(i, i == timed-1, g.name, g.wrap))
		i++
	}
	return compose(composed...)
}

// compose wraps final in guards, the first outermost.
func compose(guards ...guard) func(step) step {
	return func(final step) step {
		for i := len(guards) - 1; i >= 0; i-- {
			final = guards[i](final)
		}
		return final
	}
}

// timed measures the time a guard spends itself: the time of its step
// minus the time of the steps it calls. Each timed guard reads the clock
// on entry and on exit and adds its time to c.span[i], which the guard
// before it subtracts (the untimed steps between two guards count as the
// first one's); the last guard's next step, the execution, is timed
// apart. Two clock reads a guard.
func (inv *Invoker) timed(i int, last bool, name string, g guard) guard {
	now := inv.pipeline.now
	if now == nil {
		now = time.Now
	}
	return func(next step) step {
		inner := next
		if last {
			inner = func(ctx context.Context, c *call) ToolResult {
				if inv.metrics == nil {
					return next(ctx, c)
				}
				start := now()
				res := next(ctx, c)
				d := now().Sub(start)
				c.timing.span[i+1] += d
				c.timing.self[i+1] += d
				c.timing.ran |= 1 << (i + 1)
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
			start := now()
			c.timing.span[i+1] = 0
			res := step(ctx, c)
			d := now().Sub(start)
			c.timing.span[i] += d
			c.timing.self[i] += d - c.timing.span[i+1]
			c.timing.ran |= 1 << i
			once.Do(func() { observe = inv.metrics.GuardTimer(name) })
			observe(d - c.timing.span[i+1])
			return res
		}
	}
}

// maxTimedGuards bounds the timed guards of the chain (the size of
// call.span, an array so that timing a call allocates nothing).
const maxTimedGuards = 15
