package models

import (
	"context"
	"fmt"
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

// QueueTicket is one call's place in a category queue.
type QueueTicket struct {
	ID       int64  `gorm:"primaryKey;autoIncrement"`
	Category string `gorm:"size:64;not null;index:idx_queue_tickets_category"`
	// Token names the call's place (the instance makes it; unique).
	Token   string `gorm:"size:64;not null;uniqueIndex"`
	Holding bool   `gorm:"not null"`
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
)

// SlotRequest is a call asking for a slot of Category: at most Limit
// calls hold one at once and at most MaxWait wait; Token names its place
// and Lease is how long the place holds from Now without a renewal.
type SlotRequest struct {
	Category, Token string
	Limit, MaxWait  int
	Now             time.Time
	Lease           time.Duration
}

// queueLock is the advisory lock of a category's queue.
func queueLock(category string) string { return "queue:" + category }

// TakeSlot gives the call of r a slot when one is free and no call that
// arrived before it waits; else a place in line (its ticket, taken at its
// first request), unless MaxWait calls wait already. A call with a place
// asks again (when woken, or at least every renewal) and is given a slot
// once fewer calls wait before it than there are free slots. Places and
// slots whose lease lapsed are dropped first.
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
		var mine []QueueTicket
		if err := tx.Where("token = ?", r.Token).Limit(1).Find(&mine).Error; err != nil {
			return err
		}
		holding, waiting, err := queueCounts(tx, r.Category)
		if err != nil {
			return err
		}
		switch {
		case len(mine) == 1 && mine[0].Holding:
			got = SlotHeld
		case len(mine) == 1:
			var before int64
			if err := tx.Model(&QueueTicket{}).Where("category = ? AND holding = ? AND id < ?", r.Category, false, mine[0].ID).
				Count(&before).Error; err != nil {
				return err
			}
			if before < int64(r.Limit)-holding {
				got = SlotHeld
			}
		case waiting == 0 && holding < int64(r.Limit):
			got = SlotHeld
			return tx.Create(&QueueTicket{Category: r.Category, Token: r.Token, Holding: true, LeaseUntil: until}).Error
		case waiting >= int64(r.MaxWait):
			got = SlotFull
			return nil
		default:
			return tx.Create(&QueueTicket{Category: r.Category, Token: r.Token, LeaseUntil: until}).Error
		}
		return tx.Exec("UPDATE queue_tickets SET holding = ?, lease_until = ? WHERE id = ?", got == SlotHeld, until, mine[0].ID).Error
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
func (s *Store) RenewSlot(ctx context.Context, category, token string, now time.Time, lease time.Duration) (bool, error) {
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
		return tx.Create(&QueueTicket{Category: category, Token: token, Holding: true, LeaseUntil: until}).Error
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

// QueueDepth counts the calls of category holding a slot and those
// waiting, across every instance, leaving out lapsed leases.
func (s *Store) QueueDepth(ctx context.Context, category string, now time.Time) (holding, waiting int64, err error) {
	holding, waiting, err = queueCounts(s.db.WithContext(ctx).Where("lease_until >= ?", now.UnixMilli()), category)
	if err != nil {
		return 0, 0, fmt.Errorf("count the queue of %s: %w", category, err)
	}
	return holding, waiting, nil
}
