// Package cluster makes instances over one database act as one where only
// one of them may act: it elects a leader, which alone runs the background
// jobs that must run once in the cluster (approval expiry, the alert
// monitor, pruning, the tool-file watcher).
//
// The leader is whoever holds the lease "leader", a row of the leases
// table (models.Lease) whose times are all the database's clock. The
// leader renews it for LeaderLease every Retry. Followers try to take it
// every Retry, and just after the lease they saw would lapse; a lapsed
// lease goes to the first that asks. A leader stops its jobs when a
// renewal finds the lease lapsed or another's, and, renewing or not, once
// LeaderLease - Retry has passed on its monotonic clock since it sent the
// last renewal that succeeded: Leading reads that deadline, so a leader
// woken from SIGSTOP says at once that it no longer leads. Hence:
//
//   - a frozen or partitioned leader loses leadership within
//     LeaderLease + Retry, and a killed one is replaced within about
//     LeaderLease; one that stops (SIGTERM) ends its jobs, then releases
//     the lease, and another leads within Retry;
//   - two leaders never run jobs at once, given jobs that end within Retry
//     of being told to: a renewal's lease ends no earlier than LeaderLease
//     after the leader sent it, by the database's clock, and the leader
//     stops Retry before that by its own. The instances' clocks need not
//     agree with each other, only tick at the same rate.
//
// One moment escapes the elector: a leader woken after its lease lapsed
// has its goroutines woken together, and a job may act before the elector
// stops it. A job whose effect must not repeat guards it in the store too,
// as the alert monitor claims each post.
//
// Leadership was a Postgres session advisory lock before: a frozen
// process's session lives on, and its lock with it, so a frozen leader
// kept the cluster leaderless for as long as it was frozen, then led on
// as if nothing had happened.
//
// On SQLite the one instance always leads.
package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"math"
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
// renews its lease.
const Retry = time.Second

// LeaderLease is how long the leader's lease lasts past each renewal. It
// outlasts a few failed renewals (a slow database), and it bounds how long
// a dead or frozen leader keeps the cluster without one.
const LeaderLease = 4 * time.Second

// leaseName names the leader's lease.
const leaseName = "leader"

// Job is a leader-only background job: it runs until ctx ends, which is
// when the instance stops or loses leadership. A job that fails is
// logged, and runs again when the instance next leads.
type Job func(ctx context.Context) error

// Elector elects this instance leader, or not, and runs the leader's jobs.
type Elector struct {
	store    *models.Store
	instance string
	// holder is this run's name in the lease: the instance and a run id,
	// so that a restarted instance never takes its earlier run's lease
	// for its own.
	holder string
	log    *slog.Logger
	retry  time.Duration
	lease  time.Duration
	// epoch is the origin of until, read on the monotonic clock.
	epoch time.Time
	// until is how long after epoch this instance may run the leader's
	// jobs; 0 when it does not lead.
	until atomic.Int64
}

// New returns the elector of instance over store. log is the app's,
// which names the instance already.
func New(store *models.Store, instance string, log *slog.Logger) *Elector {
	return &Elector{store: store, instance: instance, holder: instance + "#" + models.NewID(),
		log: log, retry: Retry, lease: LeaderLease, epoch: time.Now()}
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
	if e.Leading() {
		return Leader
	}
	return Follower
}

// Leading reports whether this instance leads. It reads the clock, not
// only the elector's state: a leader frozen past its deadline says it
// does not lead the moment it wakes, before its elector has run.
func (e *Elector) Leading() bool {
	until := e.until.Load()
	return until > 0 && int64(time.Since(e.epoch)) < until
}

// Run tries to lead until ctx ends, running jobs whenever it leads and
// stopping them when it no longer does. It returns once they have ended
// and the lease is released.
func (e *Elector) Run(ctx context.Context, jobs ...Job) error {
	if !e.store.Shared() {
		e.until.Store(math.MaxInt64)
		e.lead(ctx, jobs, func(ctx context.Context) bool { <-ctx.Done(); return true })
		return nil
	}
	failing := false
	for {
		sent := time.Now()
		take, cancel := context.WithTimeout(ctx, e.retry)
		held, left, err := e.store.TakeLease(take, leaseName, e.holder, e.lease)
		cancel()
		wait := e.retry
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			e.log.Warn("cannot try to lead; retrying", "err", err)
			failing = true
		case err == nil && held:
			failing = false
			e.extend(sent)
			// Unless the answer came too late to lead on (frozen meanwhile).
			if e.Leading() {
				e.lead(ctx, jobs, e.keep)
			}
		case err == nil:
			failing = false
			// Try again just after the lease seen lapses, unless it is
			// renewed meanwhile, which the next try will see.
			wait = min(wait, left+10*time.Millisecond)
		}
		if !sleep(ctx, wait) {
			return nil
		}
	}
}

// lead runs jobs while keep holds leadership, until it returns: true when
// ctx ended, false when leadership was lost. Once the jobs have ended, a
// leader that stops releases the lease for another to take at once.
func (e *Elector) lead(ctx context.Context, jobs []Job, keep func(ctx context.Context) bool) {
	jobCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	e.log.Info("leading: running the leader-only jobs", "jobs", len(jobs))
	for _, job := range jobs {
		wg.Go(func() {
			if err := job(jobCtx); err != nil {
				e.log.Error("a leader-only job failed", "err", err)
			}
		})
	}
	stopping := keep(ctx)
	e.until.Store(0)
	stop()
	wg.Wait()
	if stopping {
		release, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		if err := e.store.ReleaseLease(release, leaseName, e.holder); err != nil {
			e.log.Warn("stopping: the lease is left to lapse", "err", err)
		}
		cancel()
	}
}

// keep renews the lease every retry until ctx ends (true) or leadership
// is lost (false): a renewal finds the lease lapsed or another's, or none
// succeeds before the deadline the last one set.
func (e *Elector) keep(ctx context.Context) bool {
	failing := false
	for {
		deadline := e.deadline()
		if !sleep(ctx, min(e.retry, time.Until(deadline))) {
			return true
		}
		if !time.Now().Before(deadline) {
			e.log.Warn("leadership lost: the lease was not renewed in time; stopping the leader-only jobs")
			return false
		}
		sent := time.Now()
		renew, cancel := context.WithDeadline(ctx, deadline)
		ok, err := e.store.RenewLease(renew, leaseName, e.holder, e.lease)
		cancel()
		switch {
		case ctx.Err() != nil:
			return true
		case err != nil:
			if !failing {
				e.log.Warn("cannot renew the leader's lease; retrying", "err", err, "deadline", time.Until(deadline).Round(time.Millisecond))
				failing = true
			}
		case !ok:
			e.log.Warn("leadership lost: the lease lapsed or another instance holds it; stopping the leader-only jobs")
			return false
		default:
			failing = false
			e.extend(sent)
		}
	}
}

// extend lets this instance lead until LeaderLease - Retry after sent,
// when it sent the request that took or renewed the lease: the database
// started the lease no earlier.
func (e *Elector) extend(sent time.Time) {
	e.until.Store(int64(sent.Sub(e.epoch) + e.lease - e.retry))
}

// deadline is when this instance must stop leading unless it renews.
func (e *Elector) deadline() time.Time {
	return e.epoch.Add(time.Duration(e.until.Load()))
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
