package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Alert statuses.
const (
	AlertFiring   = "firing"
	AlertResolved = "resolved"
)

// AlertState is an alert as the cluster knows it, kept in the database so
// that whichever instance leads continues from it: an alert fires once per
// event, not once per leader. Rule names the kind of alert and Tool what
// it is about. Status is what holds now, firing or resolved (a resolved
// alert is kept until its resolution is posted, then removed); Notified is
// the status last posted ("" before the first), NotifiedAt when. While
// PostingUntil lies ahead, one instance is posting the status: others
// leave it that post, and take it over once PostingUntil has passed (it
// died posting). Times are the instances' clocks, which must agree to well
// within PostingUntil's hold (NTP).
type AlertState struct {
	Rule         string    `gorm:"primaryKey;size:64"`
	Tool         string    `gorm:"primaryKey;size:64"`
	Status       string    `gorm:"size:16;not null"`
	Since        time.Time `gorm:"not null"`
	Notified     string    `gorm:"size:16;not null;default:''"`
	NotifiedAt   *time.Time
	PostingUntil *time.Time
}

// AlertStates returns the alerts of rule the database holds.
func (s *Store) AlertStates(ctx context.Context, rule string) ([]AlertState, error) {
	var out []AlertState
	if err := s.db.WithContext(ctx).Where("rule = ?", rule).Order("tool").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("read alerts %s: %w", rule, err)
	}
	return out, nil
}

// RaiseAlert records that the alert of rule on tool fires, since at unless
// it already did: a new alert, or one resolved but whose resolution was
// not posted yet, which then fires on since its first firing (what was
// posted still holds, and nothing is posted).
func (s *Store) RaiseAlert(ctx context.Context, rule, tool string, at time.Time) error {
	err := s.db.WithContext(ctx).Exec(`INSERT INTO alert_states (rule, tool, status, since, notified) VALUES (?, ?, ?, ?, '')
ON CONFLICT (rule, tool) DO UPDATE SET status = excluded.status,
	since = CASE WHEN alert_states.notified = ? THEN alert_states.since ELSE excluded.since END
WHERE alert_states.status = ?`, rule, tool, AlertFiring, at.UTC(), AlertFiring, AlertResolved).Error
	if err != nil {
		return fmt.Errorf("raise alert %s %s: %w", rule, tool, err)
	}
	return nil
}

// ResolveAlert records that the firing alert of rule on tool no longer
// fires. One never posted as firing, and not being posted, is removed: it
// has nothing to resolve.
func (s *Store) ResolveAlert(ctx context.Context, rule, tool string, at time.Time) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("DELETE FROM alert_states WHERE rule = ? AND tool = ? AND status = ? AND notified = '' AND (posting_until IS NULL OR posting_until < ?)",
			rule, tool, AlertFiring, at.UTC()).Error; err != nil {
			return err
		}
		return tx.Exec("UPDATE alert_states SET status = ? WHERE rule = ? AND tool = ? AND status = ?", AlertResolved, rule, tool, AlertFiring).Error
	})
	if err != nil {
		return fmt.Errorf("resolve alert %s %s: %w", rule, tool, err)
	}
	return nil
}

// ClaimAlertPost makes the caller the one instance posting status for the
// alert of rule on tool, until until: false when the alert's status is not
// status any more, status was posted already, or another instance is
// posting it.
func (s *Store) ClaimAlertPost(ctx context.Context, rule, tool, status string, at, until time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Exec("UPDATE alert_states SET posting_until = ? WHERE rule = ? AND tool = ? AND status = ? AND notified <> ? AND (posting_until IS NULL OR posting_until < ?)",
		until.UTC(), rule, tool, status, status, at.UTC())
	if res.Error != nil {
		return false, fmt.Errorf("claim the post of alert %s %s: %w", rule, tool, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// AlertPosted records that status was posted for the alert of rule on
// tool, at at, ending the claim; a resolved alert so posted is removed
// (unless it fired again meanwhile: then its new firing is to be posted).
// posted false ends the claim without recording a post (the post failed:
// the next check tries again).
func (s *Store) AlertPosted(ctx context.Context, rule, tool, status string, posted bool, at time.Time) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if !posted {
			return tx.Exec("UPDATE alert_states SET posting_until = NULL WHERE rule = ? AND tool = ?", rule, tool).Error
		}
		if err := tx.Exec("UPDATE alert_states SET notified = ?, notified_at = ?, posting_until = NULL WHERE rule = ? AND tool = ?",
			status, at.UTC(), rule, tool).Error; err != nil {
			return err
		}
		return tx.Exec("DELETE FROM alert_states WHERE rule = ? AND tool = ? AND status = ? AND notified = ?",
			rule, tool, AlertResolved, AlertResolved).Error
	})
	if err != nil {
		return fmt.Errorf("record the post of alert %s %s: %w", rule, tool, err)
	}
	return nil
}
