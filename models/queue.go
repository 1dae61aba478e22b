package models

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
)

// Category queues shared by the instances over one database when there
// is no Redis: a call that wants one of a category's slots holds a row
// of queue_tickets while it waits and while it runs. The row's id is its
// ticket, so waiters are admitted in the order they arrived, whichever
// instance took them; Holding marks the rows given a slot. The instance
// renews each row's lease while its call waits or runs (RenewSlot), so
// the rows of an instance that died lapse and free their slots and places
// by themselves. Every change of a category's rows runs under the
// category's advisory lock: the counts a decision reads cannot change
// before it is written. Leases are Unix milliseconds of the instances'
// clocks, which must agree to well within a lease (NTP), as for claims.
//
// A free slot goes to the principal holding the fewest slots of the
// category (FairOrder), and each principal has its own waiting bound, so
// one caller's flood of calls cannot keep another's waiting behind it.

// QueueTicket is one call's place in a category queue.
type QueueTicket struct {
	ID       int64  `gorm:"primaryKey;autoIncrement"`
	Category string `gorm:"size:64;not null;index:idx_queue_tickets_category"`
	// Token names the call's place (the instance makes it; unique).
	Token   string `gorm:"size:64;not null;uniqueIndex"`
	Holding bool   `gorm:"not null"`
	// Principal names whose call it is: slots are shared fairly between
	// principals.
	Principal string `gorm:"size:64;not null;default:''"`
	// LeaseUntil is when the place lapses unless renewed, in Unix ms.
	LeaseUntil int64 `gorm:"not null"`
}

// Admission is what TakeSlot decided for a call.
type Admission int

const (
	// SlotWaiting: the call has its place in line and must ask again.
	SlotWaiting Admission = iota
	// SlotHeld: the call holds a slot and may run.
	SlotHeld
	// SlotFull: the waiting list is full; the call has no place.
	SlotFull
	// SlotPrincipalFull: the caller has MaxWaitEach calls waiting
	// already; the call has no place.
	SlotPrincipalFull
)

// SlotRequest is a call of Principal asking for a slot of Category: at
// most Limit calls hold one at once, at most MaxWait wait, and at most
// MaxWaitEach of one principal wait (0: no bound of its own); Token names
// its place and Lease is how long the place holds from Now without a
// renewal.
type SlotRequest struct {
	Category, Token, Principal  string
	Limit, MaxWait, MaxWaitEach int
	Now                         time.Time
	Lease                       time.Duration
}

// Waiter is a place in line: its token and whose call it is, in the
// order of arrival.
type Waiter struct {
	Token, Principal string
}

// FairOrder says which of waiters (in their order of arrival) are given
// the free slots: each slot in turn goes to the first waiter of the
// principal holding the fewest slots (counting those just given), so a
// principal with many calls running or waiting yields to one with fewer,
// and within a principal the order of arrival holds. holding counts the
// slots each principal holds.
func FairOrder(holding map[string]int, waiters []Waiter, free int) []string {
	held := make(map[string]int, len(holding))
	for p, n := range holding {
		held[p] = n
	}
	given := make([]bool, len(waiters))
	var out []string
	for range free {
		best := -1
		for i, w := range waiters {
			if !given[i] && (best < 0 || held[w.Principal] < held[waiters[best].Principal]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		given[best] = true
		held[waiters[best].Principal]++
		out = append(out, waiters[best].Token)
	}
	return out
}

// queueLock is the advisory lock of a category's queue.
func queueLock(category string) string { return "queue:" + category }

// TakeSlot gives the call of r a slot when one is free and no call waits;
// else a place in line (its ticket, taken at its first request), unless
// MaxWait calls wait already, or MaxWaitEach of its principal. A call with
// a place asks again (when woken, or at least every renewal) and is given
// a slot once FairOrder gives it one of the free slots. Places and slots
// whose lease lapsed are dropped first.
func (s *Store) TakeSlot(ctx context.Context, r SlotRequest) (Admission, error) {
	now := r.Now.UnixMilli()
	until := r.Now.Add(r.Lease).UnixMilli()
	got := SlotWaiting
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := s.dialect.serialize(tx, queueLock(r.Category)); err != nil {
			return err
		}
		if err := tx.Exec("DELETE FROM queue_tickets WHERE category = ? AND lease_until < ?", r.Category, now).Error; err != nil {
			return err
		}
		var rows []QueueTicket
		if err := tx.Where("category = ?", r.Category).Order("id").Find(&rows).Error; err != nil {
			return err
		}
		var mine *QueueTicket
		holding, waiting, waitingMine := map[string]int{}, []Waiter{}, 0
		for i, row := range rows {
			if row.Token == r.Token {
				mine = &rows[i]
			}
			if row.Holding {
				holding[row.Principal]++
				continue
			}
			waiting = append(waiting, Waiter{Token: row.Token, Principal: row.Principal})
			if row.Principal == r.Principal {
				waitingMine++
			}
		}
		held := len(rows) - len(waiting)
		switch {
		case mine != nil && mine.Holding:
			got = SlotHeld
		case mine != nil:
			if slices.Contains(FairOrder(holding, waiting, r.Limit-held), r.Token) {
				got = SlotHeld
			}
		case len(waiting) == 0 && held < r.Limit:
			got = SlotHeld
			return tx.Create(&QueueTicket{Category: r.Category, Token: r.Token, Principal: r.Principal, Holding: true, LeaseUntil: until}).Error
		case len(waiting) >= r.MaxWait:
			got = SlotFull
			return nil
		case r.MaxWaitEach > 0 && waitingMine >= r.MaxWaitEach:
			got = SlotPrincipalFull
			return nil
		default:
			return tx.Create(&QueueTicket{Category: r.Category, Token: r.Token, Principal: r.Principal, LeaseUntil: until}).Error
		}
		return tx.Exec("UPDATE queue_tickets SET holding = ?, lease_until = ? WHERE id = ?", got == SlotHeld, until, mine.ID).Error
	})
	if err != nil {
		return SlotWaiting, fmt.Errorf("take a slot of %s: %w", r.Category, err)
	}
	return got, nil
}

// queueCounts are the calls holding a slot of category and those waiting.
func queueCounts(tx *gorm.DB, category string) (holding, waiting int64, err error) {
	var rows []struct {
		Holding bool
		N       int64
	}
	if err := tx.Model(&QueueTicket{}).Select("holding, count(*) AS n").Where("category = ?", category).Group("holding").Scan(&rows).Error; err != nil {
		return 0, 0, err
	}
	for _, r := range rows {
		if r.Holding {
			holding = r.N
		} else {
			waiting = r.N
		}
	}
	return holding, waiting, nil
}

// RenewSlot extends the lease of the slot token holds to now + lease. A
// slot whose lease lapsed while its call still runs (its instance was
// paused past the lease) is taken back as held, so the count stays true
// to what runs: false then.
func (s *Store) RenewSlot(ctx context.Context, category, token, principal string, now time.Time, lease time.Duration) (bool, error) {
	until := now.Add(lease).UnixMilli()
	res := s.db.WithContext(ctx).Exec("UPDATE queue_tickets SET lease_until = ? WHERE token = ? AND holding = ? AND lease_until >= ?",
		until, token, true, now.UnixMilli())
	if res.Error != nil {
		return false, fmt.Errorf("renew the slot of %s: %w", category, res.Error)
	}
	if res.RowsAffected == 1 {
		return true, nil
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := s.dialect.serialize(tx, queueLock(category)); err != nil {
			return err
		}
		if err := tx.Exec("DELETE FROM queue_tickets WHERE token = ?", token).Error; err != nil {
			return err
		}
		return tx.Create(&QueueTicket{Category: category, Token: token, Principal: principal, Holding: true, LeaseUntil: until}).Error
	})
	if err != nil {
		return false, fmt.Errorf("take back the slot of %s: %w", category, err)
	}
	return false, nil
}

// ReleaseSlot drops the place or slot token holds; false when it held
// none.
func (s *Store) ReleaseSlot(ctx context.Context, token string) (bool, error) {
	res := s.db.WithContext(ctx).Exec("DELETE FROM queue_tickets WHERE token = ?", token)
	if res.Error != nil {
		return false, fmt.Errorf("release a queue slot: %w", res.Error)
	}
	return res.RowsAffected > 0, nil
}

// QueueLine counts the calls of category holding a slot and waiting in
// the cluster, and principal's waiting, leaving out lapsed leases.
func (s *Store) QueueLine(ctx context.Context, category, principal string, now time.Time) (holding, waiting, mine int64, err error) {
	var rows []struct {
		Principal string
		Holding   bool
		N         int64
	}
	err = s.db.WithContext(ctx).Model(&QueueTicket{}).Select("principal, holding, count(*) AS n").
		Where("category = ? AND lease_until >= ?", category, now.UnixMilli()).Group("principal, holding").Scan(&rows).Error
	if err != nil {
		return 0, 0, 0, fmt.Errorf("count the queue of %s: %w", category, err)
	}
	for _, r := range rows {
		switch {
		case r.Holding:
			holding += r.N
		case r.Principal == principal:
			mine += r.N
			waiting += r.N
		default:
			waiting += r.N
		}
	}
	return holding, waiting, mine, nil
}

// QueueDepth counts the calls of category holding a slot and those
// waiting, across every instance, leaving out lapsed leases.
func (s *Store) QueueDepth(ctx context.Context, category string, now time.Time) (holding, waiting int64, err error) {
	holding, waiting, err = queueCounts(s.db.WithContext(ctx).Where("lease_until >= ?", now.UnixMilli()), category)
	if err != nil {
		return 0, 0, fmt.Errorf("count the queue of %s: %w", category, err)
	}
	return holding, waiting, nil
}
