package callbacks

import (
	"context"
	"sync"
	"time"

	"toolbelt/models"
	"toolbelt/services/ops"
)

// schedule holds the pending deliveries of this run by due time. A worker
// takes the delivery due first among the principals with the fewest
// attempts in flight, and never more than each of one principal at once:
// a principal whose receiver hangs or fails holds at most its share of
// the workers, and the others' deliveries go on. A retry is scheduled
// again at its due time; no worker waits for it.
type schedule struct {
	each    int
	metrics *ops.Metrics

	mu     sync.Mutex
	queued map[string]*dueDelivery // call id → delivery waiting for its time or a worker
	busy   map[uint]int            // principal → attempts in flight
	taken  map[string]bool         // call ids being attempted
	// changed is closed, and replaced, whenever a delivery is added or an
	// attempt ends: the workers waiting look again.
	changed chan struct{}
}

type dueDelivery struct {
	cb models.Callback
	at time.Time
	// heldBack is set once the delivery was due but its principal had
	// its share of the workers (counted once).
	heldBack bool
}

func newSchedule(each int, metrics *ops.Metrics) *schedule {
	return &schedule{each: max(each, 1), metrics: metrics, queued: map[string]*dueDelivery{}, busy: map[uint]int{},
		taken: map[string]bool{}, changed: make(chan struct{})}
}

// has reports whether the delivery of call id is scheduled or being
// attempted here.
func (s *schedule) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queued[id] != nil || s.taken[id]
}

// add schedules cb's next attempt at at (a delivery being attempted
// schedules its own retry once its attempt ended).
func (s *schedule) add(cb models.Callback, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queued[cb.CallID] = &dueDelivery{cb: cb, at: at}
	s.announce()
}

// next waits until a delivery is due whose principal has a worker to
// spare, and takes it; false once ctx ends.
func (s *schedule) next(ctx context.Context) (models.Callback, bool) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		s.mu.Lock()
		pick, soonest := s.pick(time.Now())
		if pick != nil {
			delete(s.queued, pick.cb.CallID)
			s.taken[pick.cb.CallID] = true
			s.busy[pick.cb.PrincipalID]++
			s.mu.Unlock()
			return pick.cb, true
		}
		changed := s.changed
		s.mu.Unlock()
		var tick <-chan time.Time
		if !soonest.IsZero() {
			if timer == nil {
				timer = time.NewTimer(time.Until(soonest))
			} else {
				timer.Reset(time.Until(soonest))
			}
			tick = timer.C
		}
		select {
		case <-ctx.Done():
			return models.Callback{}, false
		case <-changed:
		case <-tick:
		}
	}
}

// pick is the due delivery of the principal with the fewest attempts in
// flight (under its share), the one due first among those; else nil and
// when the next delivery of a principal under its share falls due (zero:
// none) (s.mu held).
func (s *schedule) pick(now time.Time) (pick *dueDelivery, soonest time.Time) {
	for _, e := range s.queued {
		busy := s.busy[e.cb.PrincipalID]
		if busy >= s.each {
			if !e.at.After(now) && !e.heldBack {
				e.heldBack = true
				s.metrics.CallbackHeldBack()
			}
			continue
		}
		if e.at.After(now) {
			if soonest.IsZero() || e.at.Before(soonest) {
				soonest = e.at
			}
			continue
		}
		if pick == nil || busy < s.busy[pick.cb.PrincipalID] ||
			(busy == s.busy[pick.cb.PrincipalID] && e.at.Before(pick.at)) {
			pick = e
		}
	}
	return pick, soonest
}

// done ends the attempt of cb taken by next.
func (s *schedule) done(cb models.Callback) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.taken, cb.CallID)
	if s.busy[cb.PrincipalID]--; s.busy[cb.PrincipalID] <= 0 {
		delete(s.busy, cb.PrincipalID)
	}
	s.announce()
}

// announce wakes the workers waiting in next (s.mu held).
func (s *schedule) announce() {
	close(s.changed)
	s.changed = make(chan struct{})
}
