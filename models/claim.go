package models

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Calls run in the background (async calls, approved calls) are claimed
// by exactly one instance's run. A queued call is claimed by the
// conditional update that makes it running (ClaimCall): of instances
// trying at once, one changes the row and the others find it running. The
// owner renews its lease while the call runs (RenewClaims); once a lease
// lapses, its owner is taken for dead and another instance takes the call
// over (TakeOverCalls, under FOR UPDATE SKIP LOCKED on Postgres): a call
// whose tool had not begun to execute (StartedAt unset) is queued again,
// with its approval back, and one that had begun is ended, so no call is
// lost and none runs twice. Times are the instances' clocks, which must
// agree to well within a lease (NTP).

// ClaimCall makes the queued call id running, claimed by owner until
// until, with result as its running result. False when the call is not
// queued (another instance claimed it, or it was cancelled or ended).
func (s *Store) ClaimCall(ctx context.Context, id, owner string, until time.Time, result string) (bool, error) {
	res := s.db.WithContext(ctx).Exec(
		"UPDATE calls SET status = ?, result = ?, claimed_by = ?, lease_until = ?, started_at = NULL, cancel_requested = ? "+
			"WHERE id = ? AND status = ?", StatusRunning, result, owner, until.UTC(), false, id, StatusQueued)
	if res.Error != nil {
		return false, fmt.Errorf("claim call %s: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// RenewClaims extends to until the leases of the running calls owner
// holds, and returns how many it holds.
func (s *Store) RenewClaims(ctx context.Context, owner string, until time.Time) (int64, error) {
	q := "UPDATE calls SET lease_until = ? WHERE claimed_by = ? AND status = ?"
	if s.dialect.postgres {
		// Locked in the order of their ids, as SaveCalls locks them: an
		// UPDATE of many rows otherwise locks them in whatever order it
		// reads them, and two writers of the same rows deadlock (40P01).
		q = "UPDATE calls SET lease_until = ? WHERE id IN " +
			"(SELECT id FROM calls WHERE claimed_by = ? AND status = ? ORDER BY id FOR UPDATE)"
	}
	res := s.db.WithContext(ctx).Exec(q, until.UTC(), owner, StatusRunning)
	if res.Error != nil {
		return 0, fmt.Errorf("renew call claims: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// StartCall records that the tool of a call owner holds begins to
// execute, before it does: from then on a takeover ends the call rather
// than run it again. False when owner no longer holds the call (its lease
// lapsed and another instance took it over): then it must not run.
func (s *Store) StartCall(ctx context.Context, id, owner string, at time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Exec("UPDATE calls SET started_at = ? WHERE id = ? AND claimed_by = ? AND status = ?",
		at.UTC(), id, owner, StatusRunning)
	if res.Error != nil {
		return false, fmt.Errorf("start call %s: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// ReleaseCall queues again a call owner holds whose tool has not begun,
// with its approval back (the instance stops: another runs it); false
// when owner does not hold it or its tool began.
func (s *Store) ReleaseCall(ctx context.Context, id, owner string) (bool, error) {
	released := false
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Exec("UPDATE calls SET status = ?, claimed_by = '', lease_until = NULL WHERE id = ? AND claimed_by = ? AND status = ? AND started_at IS NULL",
			StatusQueued, id, owner, StatusRunning)
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		released = true
		return tx.Model(&Approval{}).Where("call_id = ? AND status = ?", id, ApprovalUsed).Update("status", ApprovalApproved).Error
	})
	if err != nil {
		return false, fmt.Errorf("release call %s: %w", id, err)
	}
	return released, nil
}

// RequestCancel marks a running call to be cancelled by its owner, which
// checks the mark once it holds the call (a cancel notice may come before
// that); false when the call is not running.
func (s *Store) RequestCancel(ctx context.Context, id string) (bool, error) {
	res := s.db.WithContext(ctx).Exec("UPDATE calls SET cancel_requested = ? WHERE id = ? AND status = ?", true, id, StatusRunning)
	if res.Error != nil {
		return false, fmt.Errorf("request cancel of call %s: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// CancelRequested reports whether a call was asked to be cancelled.
func (s *Store) CancelRequested(ctx context.Context, id string) (bool, error) {
	var marks []bool
	if err := s.db.WithContext(ctx).Model(&Call{}).Where("id = ?", id).Limit(1).Pluck("cancel_requested", &marks).Error; err != nil {
		return false, fmt.Errorf("read cancel of call %s: %w", id, err)
	}
	return len(marks) == 1 && marks[0], nil
}

// EndCallIf records c's end (status, error code, result, finished_at)
// when the call is in state from, and reports whether it was: a queued
// call is cancelled this way only if no instance claimed it meanwhile.
func (s *Store) EndCallIf(ctx context.Context, c *Call, from string) (bool, error) {
	ok, err := endCallIf(s.db.WithContext(ctx), c, from)
	if err != nil {
		return false, fmt.Errorf("end call %s: %w", c.ID, err)
	}
	return ok, nil
}

func endCallIf(tx *gorm.DB, c *Call, from string) (bool, error) {
	res := tx.Exec("UPDATE calls SET status = ?, error_code = ?, result = ?, request = '', finished_at = ?, total_ms = ? WHERE id = ? AND status = ?",
		c.Status, c.ErrorCode, c.Result, c.FinishedAt, c.TotalMs, c.ID, from)
	return res.RowsAffected == 1, res.Error
}

// Void says which claims TakeOverCalls takes for dead.
type Void struct {
	// Now is the time leases are compared with: one that ends before it
	// has lapsed.
	Now time.Time
	// Run, when set, is an earlier run of this instance (its name and a
	// '#'): its claims are void at once, since the instance restarted.
	Run string
	// All takes every claim for dead: SQLite is one process's file, so
	// at start no other run can hold a claim.
	All bool
	// Self is the run taking over, whose own claims are never void: it
	// is alive.
	Self string
	// Limit bounds the calls taken over at once.
	Limit int
}

// Takeover is what becomes of a running call whose claim is void: queued
// again (Requeue), or ended with Status, ErrorCode and Result.
type Takeover struct {
	Requeue                   bool
	Status, ErrorCode, Result string
}

// voidCalls selects the open calls whose claim v voids. Its first
// condition is the partial index idx_calls_open's own: SQLite uses a
// partial index only for a query that states its condition, and without
// it the check that runs every second read the whole history (a scan that
// grew with every call recorded).
func voidCalls(tx *gorm.DB, v Void) *gorm.DB {
	q := tx.Model(&Call{}).Where(openCalls).Where("status IN ?", []string{StatusQueued, StatusRunning})
	if !v.All {
		cond := "status = ? OR lease_until IS NULL OR lease_until < ?"
		args := []any{StatusQueued, v.Now.UTC()}
		if v.Run != "" {
			cond += ` OR claimed_by LIKE ? ESCAPE '!'`
			args = append(args, likePrefix(v.Run))
		}
		q = q.Where(cond, args...)
	}
	if v.Self != "" {
		q = q.Where("claimed_by <> ?", v.Self)
	}
	return q
}

// TakeOverCalls takes over, in one transaction, the open background calls
// whose claim is void: queued calls (which nobody holds) are returned to
// be claimed; running ones are handed to decide, which queues them again
// (their approval, consumed by the run that died, back to approved) or
// ends them. On Postgres the rows are locked FOR UPDATE SKIP LOCKED, so
// instances taking over at once share them out, never take one twice.
// It returns the queued calls, oldest first, and the ended ones.
func (s *Store) TakeOverCalls(ctx context.Context, v Void, decide func(c *Call) Takeover) (queued, ended []Call, err error) {
	void := func(tx *gorm.DB) *gorm.DB { return voidCalls(tx, v) }
	// Every instance looks every second and nearly always finds nothing:
	// a read says so without the transaction (on SQLite, the write lock).
	var due int64
	if err := void(s.db.WithContext(ctx)).Limit(1).Count(&due).Error; err != nil {
		return nil, nil, fmt.Errorf("take over calls: %w", err)
	}
	if due == 0 {
		return nil, nil, nil
	}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		q := void(tx)
		if s.dialect.postgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"})
		}
		var open []Call
		if err := q.Order("created_at").Limit(max(v.Limit, 1)).Find(&open).Error; err != nil {
			return err
		}
		for _, c := range open {
			if c.Status == StatusQueued {
				queued = append(queued, c)
				continue
			}
			t := decide(&c)
			if t.Requeue {
				if err := tx.Exec("UPDATE calls SET status = ?, claimed_by = '', lease_until = NULL, started_at = NULL WHERE id = ?", StatusQueued, c.ID).Error; err != nil {
					return err
				}
				if err := tx.Model(&Approval{}).Where("call_id = ? AND status = ?", c.ID, ApprovalUsed).Update("status", ApprovalApproved).Error; err != nil {
					return err
				}
				c.Status = StatusQueued
				queued = append(queued, c)
				continue
			}
			now := v.Now.UTC()
			c.Status, c.ErrorCode, c.Result, c.FinishedAt = t.Status, t.ErrorCode, t.Result, &now
			c.TotalMs = now.Sub(c.CreatedAt).Milliseconds()
			if _, err := endCallIf(tx, &c, StatusRunning); err != nil {
				return err
			}
			ended = append(ended, c)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("take over calls: %w", err)
	}
	return queued, ended, nil
}

// likePrefix is a LIKE pattern (escape character '!') matching what
// starts with p.
func likePrefix(p string) string {
	return strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(p) + "%"
}
