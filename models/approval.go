package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Approval states.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalExpired  = "expired"
	ApprovalUsed     = "used"
)

// approvalsLock serializes deciding and expiring approvals (see
// dialect.serialize): a decision and the expiry never both end one.
const approvalsLock = "approvals"

// Approval is a human's decision on one dangerous call, bound to the tool
// version, the principal and the hash of the canonical arguments, single
// use and expiring.
type Approval struct {
	ID          string     `gorm:"primaryKey;size:32" json:"id"`
	CallID      string     `gorm:"size:32;index" json:"call_id"`
	Tool        string     `gorm:"size:64" json:"tool"`
	Version     string     `gorm:"size:64" json:"version"`
	VersionID   uint       `json:"-"`
	PrincipalID uint       `gorm:"index" json:"principal_id"`
	ArgsHash    string     `gorm:"size:64" json:"args_hash"`
	Arguments   string     `json:"arguments"` // redacted, for the reviewer
	Status      string     `gorm:"size:16;index" json:"status"`
	Reason      string     `json:"reason,omitempty"`
	DecidedBy   *uint      `json:"decided_by,omitempty"`
	DecidedAt   *time.Time `json:"decided_at,omitempty"`
	ExpiresAt   time.Time  `gorm:"index" json:"expires_at"`
	CreatedAt   time.Time  `json:"created_at"`
	// DecidedVia is the door the decision came through: api, mcp,
	// console, or "console sso" when the reviewer signed in through the
	// identity provider (models.Actor.Door).
	DecidedVia string `gorm:"size:16;not null;default:''" json:"decided_via,omitempty" example:"console sso"`
	// DeciderName names the person who decided when an identity provider
	// signed them in (models.PersonName), as they were named then; empty
	// when a key decided (DecidedBy names its principal).
	DeciderName string `gorm:"size:300;not null;default:''" json:"decider_name,omitempty" example:"Alice Example <alice@example.com>, sso subject 248289761001 at https://idp.example.com"`
}

// CreateApproval stores a pending approval and its waiting call at once,
// with the call's callback delivery when it names one (cb not nil). A
// principal already waiting on max approvals (max > 0) gets
// ErrRateLimited and nothing is stored: counted in the transaction under
// a lock of the principal's, so two instances cannot both take the last
// place.
func (s *Store) CreateApproval(ctx context.Context, a *Approval, c *Call, cb *Callback, max int) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if max > 0 {
			if err := s.dialect.serialize(tx, fmt.Sprintf("approvals-of:%d", a.PrincipalID)); err != nil {
				return err
			}
			var n int64
			if err := tx.Model(&Approval{}).Where("principal_id = ? AND status = ? AND expires_at > ?", a.PrincipalID, ApprovalPending, time.Now().UTC()).
				Count(&n).Error; err != nil {
				return err
			}
			if n >= int64(max) {
				return ErrRateLimited.Errorf("%d of your calls are waiting for a reviewer, the most one principal may have", n)
			}
		}
		if err := tx.Save(c).Error; err != nil {
			return err
		}
		if cb != nil {
			if err := tx.Create(cb).Error; err != nil {
				return err
			}
		}
		return tx.Create(a).Error
	})
	if errors.Is(err, ErrRateLimited) {
		return err
	}
	if err != nil {
		return fmt.Errorf("create approval for call %s: %w", c.ID, err)
	}
	return nil
}

// ApprovalByID returns one approval.
func (s *Store) ApprovalByID(ctx context.Context, id string) (*Approval, error) {
	var a Approval
	if err := s.db.WithContext(ctx).Where("id = ?", id).First(&a).Error; err != nil {
		return nil, notFound(err, "approval %q", id)
	}
	return &a, nil
}

// Approvals lists approvals in a state (all when empty), newest first.
func (s *Store) Approvals(ctx context.Context, status string, limit int) ([]Approval, error) {
	q := s.db.WithContext(ctx).Order("created_at DESC").Limit(limit)
	if status != "" {
		q = q.Where("status = ?", status)
	}
	var out []Approval
	if err := q.Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	return out, nil
}

// DecideApproval records a decision on a pending, unexpired approval; an
// approved call is queued in the same transaction.
// check sees the approval inside the transaction (a reviewer may not decide
// their own call).
func (s *Store) DecideApproval(ctx context.Context, id, status, reason string, by uint, check func(*Approval) error) (*Approval, error) {
	var a Approval
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := s.dialect.serialize(tx, approvalsLock); err != nil {
			return err
		}
		if err := tx.Where("id = ?", id).First(&a).Error; err != nil {
			return notFound(err, "approval %q", id)
		}
		if err := check(&a); err != nil {
			return err
		}
		if a.Status != ApprovalPending {
			return ErrConflict.Errorf("approval %s is %s", id, a.Status)
		}
		now := time.Now().UTC()
		if now.After(a.ExpiresAt) {
			// Left pending: the expiry sweep ends the parked call with it.
			return ErrConflict.Errorf("approval %s expired at %s", id, a.ExpiresAt.Format(time.RFC3339))
		}
		actor := ActorOf(ctx)
		a.Status, a.Reason, a.DecidedBy, a.DecidedAt = status, reason, &by, &now
		a.DecidedVia, a.DeciderName = clip(actor.Door(), 16), clip(actor.Person, PersonMax)
		if err := tx.Model(&a).Updates(map[string]any{"status": status, "reason": reason, "decided_by": by, "decided_at": now,
			"decided_via": a.DecidedVia, "decider_name": a.DeciderName}).Error; err != nil {
			return err
		}
		if status != ApprovalApproved {
			return nil
		}
		// Queued with its approval: whichever instance claims it runs it,
		// once, even if the one deciding dies now.
		return tx.Exec("UPDATE calls SET status = ? WHERE id = ? AND status = ?", StatusQueued, a.CallID, StatusAwaitingApproval).Error
	})
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// UseApproval marks an approved approval of call used; false when it was
// not approved, or is another call's, so an approval runs one call only.
// Using it again for its own call answers true: a first use whose answer
// was lost (the database restarting as it committed) is not a refusal,
// and the call's claim, not the approval, keeps its tool to one run.
func (s *Store) UseApproval(ctx context.Context, id, call string) (bool, error) {
	res := s.db.WithContext(ctx).Model(&Approval{}).Where("id = ? AND call_id = ? AND status IN ?", id, call,
		[]string{ApprovalApproved, ApprovalUsed}).Update("status", ApprovalUsed)
	if res.Error != nil {
		return false, fmt.Errorf("use approval %s: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// ExpireApprovals marks pending approvals past their time expired and
// returns them.
func (s *Store) ExpireApprovals(ctx context.Context, now time.Time) ([]Approval, error) {
	// Nearly always nothing is due: a read says so without the write
	// transaction (BEGIN IMMEDIATE takes the database's write lock, and
	// every approvals list and console poll expires first).
	var due int64
	if err := s.db.WithContext(ctx).Model(&Approval{}).Where("status = ? AND expires_at < ?", ApprovalPending, now).
		Limit(1).Count(&due).Error; err != nil {
		return nil, fmt.Errorf("expire approvals: %w", err)
	}
	if due == 0 {
		return nil, nil
	}
	var out []Approval
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := s.dialect.serialize(tx, approvalsLock); err != nil {
			return err
		}
		if err := tx.Where("status = ? AND expires_at < ?", ApprovalPending, now).Find(&out).Error; err != nil {
			return err
		}
		if len(out) == 0 {
			return nil
		}
		ids := make([]string, len(out))
		for i, a := range out {
			ids[i] = a.ID
		}
		return tx.Model(&Approval{}).Where("id IN ?", ids).Update("status", ApprovalExpired).Error
	})
	if err != nil {
		return nil, fmt.Errorf("expire approvals: %w", err)
	}
	return out, nil
}

// ApprovedApprovalOf returns the id of a call's approved, unused approval,
// or "" when it has none.
func (s *Store) ApprovedApprovalOf(ctx context.Context, callID string) (string, error) {
	var ids []string
	err := s.db.WithContext(ctx).Model(&Approval{}).Where("call_id = ? AND status = ?", callID, ApprovalApproved).
		Limit(1).Pluck("id", &ids).Error
	if err != nil || len(ids) == 0 {
		return "", err
	}
	return ids[0], nil
}

// CancelApprovalsOf closes the pending or approved approvals of a call.
func (s *Store) CancelApprovalsOf(ctx context.Context, callID string) error {
	err := s.db.WithContext(ctx).Model(&Approval{}).
		Where("call_id = ? AND status IN ?", callID, []string{ApprovalPending, ApprovalApproved}).
		Updates(map[string]any{"status": ApprovalDenied, "reason": "cancelled by the caller"}).Error
	if err != nil {
		return fmt.Errorf("cancel approvals of call %s: %w", callID, err)
	}
	return nil
}

// ApprovalOfCall returns the latest approval a call asked for, or nil when
// it asked for none: the decision its history shows (who, when, why).
func (s *Store) ApprovalOfCall(ctx context.Context, callID string) (*Approval, error) {
	var out []Approval
	if err := s.db.WithContext(ctx).Where("call_id = ?", callID).Order("created_at DESC").Limit(1).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("read the approval of call %s: %w", callID, err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return &out[0], nil
}
