package access

import (
	"sync"
	"time"
)

// DefaultOutageGrace is how long an instance keeps serving the keys it
// checked before the database stopped answering (TOOLBELT_OUTAGE_GRACE).
const DefaultOutageGrace = 5 * time.Minute

// Outage is the one state both authentication and readiness read while
// the database does not answer: since when it has not, and whether that
// is past the grace. Within the grace, a key this instance checked
// before keeps working (the call's record is spooled to the journal);
// past it every key is refused and readiness answers 503, at the same
// moment, since both ask Refusing.
//
// The outage starts at the first failure this instance sees (a request's
// key check or a readiness probe) and ends at the first answer.
type Outage struct {
	grace time.Duration

	mu    sync.Mutex
	since time.Time // zero while the database answers
}

// NewOutage returns the outage state of an instance whose grace is grace
// (0: no grace; keys are refused as soon as the database is seen down).
func NewOutage(grace time.Duration) *Outage { return &Outage{grace: max(grace, 0)} }

// Grace is how long an outage may last before the instance refuses.
func (o *Outage) Grace() time.Duration { return o.grace }

// Down records that the database did not answer at now; an outage
// already under way keeps its start.
func (o *Outage) Down(now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() {
		o.since = now
	}
}

// Up records that the database answered: the outage, if any, is over.
func (o *Outage) Up() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.since = time.Time{}
}

// Refusing says whether, at now, the outage has lasted its grace, and
// since when the database has not answered (zero while it answers).
func (o *Outage) Refusing(now time.Time) (since time.Time, refusing bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.since, !o.since.IsZero() && now.Sub(o.since) >= o.grace
}
