// Package cluster makes instances over one database act as one where only
// one of them may act: it elects a leader, which alone runs the background
// jobs that must run once in the cluster (approval expiry, the alert
// monitor, pruning, the tool-file watcher, callback delivery).
//
// The leader is whoever holds a Postgres session advisory lock, on a
// connection of its own: followers try to take it every Retry, and when
// the leader dies Postgres ends its session and frees the lock, so another
// instance leads within about Retry. A leader that loses its connection
// stops its jobs at its next check (every Retry). On SQLite the one
// instance always leads.
package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"toolbelt/models"
)

// Roles an instance has.
const (
	Leader   = "leader"
	Follower = "follower"
)

// Retry is how often a follower tries to lead, and how often a leader
// checks that it still does.
const Retry = time.Second

// lockName names the leader's advisory lock.
const lockName = "leader"

// Job is a leader-only background job: it runs until ctx ends, which is
// when the instance stops or loses leadership.
type Job func(ctx context.Context)

// Elector elects this instance leader, or not, and runs the leader's jobs.
type Elector struct {
	store    *models.Store
	instance string
	log      *slog.Logger
	retry    time.Duration
	leading  atomic.Bool
	// changed, when set, is told each change of role (tests, metrics).
	changed func(leading bool)
}

// New returns the elector of instance over store.
func New(store *models.Store, instance string, log *slog.Logger) *Elector {
	return &Elector{store: store, instance: instance, log: log.With("instance", instance), retry: Retry}
}

// DefaultInstance is the name of an instance not configured with one:
// hostname-pid, unique on a host and across hosts.
func DefaultInstance() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "toolbelt"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// Instance is this instance's name.
func (e *Elector) Instance() string { return e.instance }

// Role is Leader or Follower.
func (e *Elector) Role() string {
	if e.leading.Load() {
		return Leader
	}
	return Follower
}

// Leading reports whether this instance leads.
func (e *Elector) Leading() bool { return e.leading.Load() }

// OnChange makes fn hear each change of role; call before Run.
func (e *Elector) OnChange(fn func(leading bool)) { e.changed = fn }

// Run tries to lead until ctx ends, running jobs whenever it leads and
// stopping them when it no longer does. It returns once they have ended
// and the lock is released.
func (e *Elector) Run(ctx context.Context, jobs ...Job) {
	failing := false
	for {
		lock, err := e.store.TryLock(ctx, lockName)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			e.log.Warn("cannot try to lead; retrying", "err", err)
			failing = true
		case err == nil && lock != nil:
			failing = false
			e.lead(ctx, lock, jobs)
		case err == nil:
			failing = false
		}
		if !sleep(ctx, e.retry) {
			return
		}
	}
}

// lead runs jobs while lock holds, until ctx ends or the lock is lost.
func (e *Elector) lead(ctx context.Context, lock *models.SessionLock, jobs []Job) {
	defer lock.Release()
	jobCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	e.setLeading(true)
	e.log.Info("leading: running the leader-only jobs", "jobs", len(jobs))
	for _, job := range jobs {
		wg.Go(func() { job(jobCtx) })
	}
	t := time.NewTicker(e.retry)
	defer t.Stop()
	for held := true; held; {
		select {
		case <-ctx.Done():
			held = false
		case <-t.C:
			check, cancel := context.WithTimeout(ctx, e.retry)
			err := lock.Check(check)
			cancel()
			if err != nil && ctx.Err() == nil {
				e.log.Warn("leadership lost: stopping the leader-only jobs", "err", err)
				held = false
			}
		}
	}
	stop()
	wg.Wait()
	e.setLeading(false)
}

func (e *Elector) setLeading(v bool) {
	e.leading.Store(v)
	if e.changed != nil {
		e.changed(v)
	}
}

// sleep waits d, or less when ctx ends first: then it reports false.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
