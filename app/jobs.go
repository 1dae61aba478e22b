package app

import (
	"context"
	"errors"
	"sync"
)

// jobs is the App's one group of background loops: each is a Run(ctx)
// that returns when ctx ends; stop cancels their context and waits for
// every one. It is the one way the App stops a loop.
type jobs struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	errs []error
}

// startJobs returns an empty group whose loops run until stop or until
// parent ends.
func startJobs(parent context.Context) *jobs {
	j := &jobs{}
	j.ctx, j.cancel = context.WithCancel(parent)
	return j
}

// Go runs loop on a goroutine of the group. A loop that fails (one that
// cannot run at all) fails the group: stop returns its error.
func (j *jobs) Go(loop func(context.Context) error) {
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		if err := loop(j.ctx); err != nil {
			j.mu.Lock()
			j.errs = append(j.errs, err)
			j.mu.Unlock()
		}
	}()
}

// stop cancels the loops and waits for them to return, with the errors
// of those that failed. It is safe to call twice.
func (j *jobs) stop() error {
	j.cancel()
	j.wg.Wait()
	j.mu.Lock()
	defer j.mu.Unlock()
	return errors.Join(j.errs...)
}
