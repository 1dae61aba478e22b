package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Callback states.
const (
	// CallbackWaiting is a delivery whose call has not ended yet.
	CallbackWaiting = "waiting"
	// CallbackPending is a delivery whose call ended: being attempted,
	// or to be resumed at the next start.
	CallbackPending = "pending"
	// CallbackDelivered is a delivery a receiver answered with a 2xx.
	CallbackDelivered = "delivered"
	// CallbackFailed is a delivery given up: its attempts or its time ran
	// out, or the receiver or the egress policy refused it for good.
	CallbackFailed = "failed"
)

// Callback is the delivery of a call's result to the URL its caller named
// (services/callbacks). It is stored when the call is accepted for later
// (async, or waiting for approval), one per call, so a delivery that was
// acknowledged survives a restart; Body holds the result once the call
// has ended, until the delivery is over.
type Callback struct {
	CallID      string `gorm:"primaryKey;size:32" json:"-"`
	PrincipalID uint   `json:"-"`
	URL         string `json:"url" example:"https://agents.example.com/hooks/toolbelt"`
	// State is waiting, pending, delivered or failed.
	State string `gorm:"size:16;index" json:"state" example:"delivered"`
	// Attempts counts the POSTs made so far.
	Attempts int `json:"attempts" example:"3"`
	// LastStatus is the HTTP status the last attempt got; 0 when it got
	// none (a network error, a refused address).
	LastStatus int `json:"last_status,omitempty" example:"204"`
	// LastError says why the last attempt failed; empty after a success.
	LastError string `json:"last_error,omitempty" example:"answered 500 Internal Server Error"`
	Body      string `json:"-"`
	// EndedAt is when the call ended and the delivery became due.
	EndedAt     *time.Time `json:"ended_at,omitempty"`
	NextAt      *time.Time `json:"next_attempt_at,omitempty"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	// ClaimedBy is the instance run attempting the delivery, until
	// LeaseUntil (ClaimCallback): one instance attempts it at a time.
	ClaimedBy  string     `gorm:"<-:false;size:128;not null;default:''" json:"-"`
	LeaseUntil *time.Time `gorm:"<-:false" json:"-"`
}

// Open reports whether the delivery is not over.
func (c *Callback) Open() bool { return c.State == CallbackWaiting || c.State == CallbackPending }

// CreateCallback stores the delivery of a call accepted for later.
func (s *Store) CreateCallback(ctx context.Context, cb *Callback) error {
	if err := s.db.WithContext(ctx).Create(cb).Error; err != nil {
		return fmt.Errorf("store callback of call %s: %w", cb.CallID, err)
	}
	return nil
}

// CallbackOf returns the delivery of a call; ErrNotFound when it has none.
func (s *Store) CallbackOf(ctx context.Context, callID string) (*Callback, error) {
	var cb Callback
	if err := s.db.WithContext(ctx).Where("call_id = ?", callID).First(&cb).Error; err != nil {
		return nil, notFound(err, "callback of call %q", callID)
	}
	return &cb, nil
}

// CallbacksOf returns the deliveries of the calls among ids, by call id.
func (s *Store) CallbacksOf(ctx context.Context, ids []string) (map[string]*Callback, error) {
	out := map[string]*Callback{}
	if len(ids) == 0 {
		return out, nil
	}
	var cbs []Callback
	if err := s.db.WithContext(ctx).Where("call_id IN ?", ids).Find(&cbs).Error; err != nil {
		return nil, fmt.Errorf("list callbacks: %w", err)
	}
	for i := range cbs {
		out[cbs[i].CallID] = &cbs[i]
	}
	return out, nil
}

// OpenCallbacks returns the deliveries not over (waiting or pending),
// oldest first.
func (s *Store) OpenCallbacks(ctx context.Context) ([]Callback, error) {
	var out []Callback
	err := s.db.WithContext(ctx).Where("state IN ?", []string{CallbackWaiting, CallbackPending}).Order("created_at").Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("list open callbacks: %w", err)
	}
	return out, nil
}

// CallbackDue makes a waiting delivery pending with the call's result as
// its body; false when the call has no waiting delivery (none, or one made
// due already).
func (s *Store) CallbackDue(ctx context.Context, callID, body string, at time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Model(&Callback{}).Where("call_id = ? AND state = ?", callID, CallbackWaiting).
		Updates(map[string]any{"state": CallbackPending, "body": body, "ended_at": at, "updated_at": at})
	if res.Error != nil {
		return false, fmt.Errorf("make callback of call %s due: %w", callID, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// SaveCallbackAttempt records how a pending delivery went: attempts, last
// status and error, the next attempt's time, and the state it is in. Body
// is dropped once the delivery is over. It changes only a pending
// delivery, so a finished one is never reopened.
func (s *Store) SaveCallbackAttempt(ctx context.Context, cb *Callback) error {
	cb.UpdatedAt = time.Now().UTC()
	if !cb.Open() {
		cb.Body, cb.NextAt = "", nil
	}
	res := s.db.WithContext(ctx).Model(&Callback{}).Where("call_id = ? AND state = ?", cb.CallID, CallbackPending).
		Updates(map[string]any{"state": cb.State, "attempts": cb.Attempts, "last_status": cb.LastStatus, "last_error": cb.LastError,
			"body": cb.Body, "next_at": cb.NextAt, "delivered_at": cb.DeliveredAt, "updated_at": cb.UpdatedAt})
	if res.Error != nil {
		return fmt.Errorf("record callback attempt of call %s: %w", cb.CallID, res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrConflict.Errorf("callback of call %s is no longer pending", cb.CallID)
	}
	return nil
}

// DropCallback deletes the delivery of a call that was never recorded (its
// acceptance did not survive a crash).
func (s *Store) DropCallback(ctx context.Context, callID string) error {
	if err := s.db.WithContext(ctx).Where("call_id = ?", callID).Delete(&Callback{}).Error; err != nil {
		return fmt.Errorf("drop callback of call %s: %w", callID, err)
	}
	return nil
}

// CallbackGeneration is the generation of a principal's callback signing
// secret (see services/callbacks: the secret is derived, never stored).
func (s *Store) CallbackGeneration(ctx context.Context, principalID uint) (uint, error) {
	p, err := s.PrincipalByID(ctx, principalID)
	if err != nil {
		return 0, err
	}
	return p.CallbackGeneration, nil
}

// RotateCallbackSecret moves a principal's callback secret to its next
// generation and returns it.
func (s *Store) RotateCallbackSecret(ctx context.Context, principalID uint) (uint, error) {
	var gen uint
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := s.dialect.serialize(tx, fmt.Sprintf("callback-secret:%d", principalID)); err != nil {
			return err
		}
		var p Principal
		if err := tx.First(&p, principalID).Error; err != nil {
			return notFound(err, "principal %d", principalID)
		}
		gen = p.CallbackGeneration + 1
		return tx.Model(&Principal{}).Where("id = ?", principalID).Update("callback_generation", gen).Error
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return 0, err
		}
		return 0, fmt.Errorf("rotate callback secret of principal %d: %w", principalID, err)
	}
	return gen, nil
}

// ClaimCallback makes owner the one instance run attempting a pending
// delivery until until: granted when no other run holds it or its lease
// lapsed (that run died), or owner holds it already (extending it).
func (s *Store) ClaimCallback(ctx context.Context, callID, owner string, now, until time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Exec("UPDATE callbacks SET claimed_by = ?, lease_until = ? WHERE call_id = ? AND state = ? "+
		"AND (claimed_by = ? OR claimed_by = '' OR lease_until IS NULL OR lease_until < ?)",
		owner, until.UTC(), callID, CallbackPending, owner, now.UTC())
	if res.Error != nil {
		return false, fmt.Errorf("claim callback of call %s: %w", callID, res.Error)
	}
	return res.RowsAffected == 1, nil
}
