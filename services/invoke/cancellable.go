package invoke

import "context"

// cancellable makes a call that is going to run cancellable by id (DELETE,
// and Shutdown past its deadline) until it ends. It stands after the
// cache in the chain: a call refused or answered from the cache is over in
// microseconds and never pays for it. Background calls are tracked for
// their whole run by resume.
func (inv *Invoker) cancellable(next step) step {
	return func(ctx context.Context, c *call) ToolResult {
		if c.life.tracked {
			return next(ctx, c)
		}
		ctx, cancel := inv.track(ctx, c.id)
		defer cancel()
		res := next(ctx, c)
		c.life.stopped = ctx.Err() != nil
		return res
	}
}

// track makes a call cancellable by id until the returned cancel runs.
// Past Shutdown's deadline a call is cancelled as it starts to run.
func (inv *Invoker) track(ctx context.Context, id string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	inv.flight.running.Store(id, cancel)
	if inv.flight.interrupting.Load() {
		cancel()
	}
	return ctx, func() {
		inv.flight.running.Delete(id)
		cancel()
	}
}
