package models

import (
	"context"
	"fmt"
	"time"
)

// RetrievalOutcome is how one call related to the selection that came
// before it in its session: the rank the called tool had there (0 when it
// was not offered), and whether the tool exists at all. Calls in sessions
// without a selection are not measured.
type RetrievalOutcome struct {
	ID          uint   `gorm:"primaryKey"`
	CallID      string `gorm:"size:32"`
	SessionID   string `gorm:"size:128"`
	SelectionID string `gorm:"size:32"`
	Tool        string `gorm:"size:64;not null"`
	// Rank is the tool's place in the selection, from 1; 0: not offered.
	Rank int `gorm:"column:offered_rank;not null"`
	// Known is false for a tool that does not exist (an invented name).
	Known     bool      `gorm:"not null"`
	CreatedAt time.Time `gorm:"index"`
}

// CreateRetrievalOutcome records one measured call.
func (s *Store) CreateRetrievalOutcome(ctx context.Context, o *RetrievalOutcome) error {
	if err := s.db.WithContext(ctx).Create(o).Error; err != nil {
		return fmt.Errorf("record retrieval outcome: %w", err)
	}
	return nil
}

// DeleteRetrievalOutcomesBefore removes outcomes older than t.
func (s *Store) DeleteRetrievalOutcomesBefore(ctx context.Context, t time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("created_at < ?", t).Delete(&RetrievalOutcome{})
	if res.Error != nil {
		return 0, fmt.Errorf("prune retrieval outcomes: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// RetrievalCount sums the measured calls of one tool name.
type RetrievalCount struct {
	Tool     string
	Known    bool
	Measured int64 // calls after a selection in their session
	Offered  int64 // of them, calls of a tool the selection offered
	RankSum  int64 // the sum of their ranks
	Top1     int64 // calls of the selection's first tool
}

// RetrievalCounts sums, per tool name, the outcomes created in [since,
// until).
func (s *Store) RetrievalCounts(ctx context.Context, since, until time.Time) ([]RetrievalCount, error) {
	var out []RetrievalCount
	err := s.db.WithContext(ctx).Model(&RetrievalOutcome{}).
		Select("tool, known, COUNT(*) AS measured, "+
			"SUM(CASE WHEN offered_rank > 0 THEN 1 ELSE 0 END) AS offered, SUM(offered_rank) AS rank_sum, "+
			"SUM(CASE WHEN offered_rank = 1 THEN 1 ELSE 0 END) AS top1").
		Where("created_at >= ? AND created_at < ?", since.UTC(), until.UTC()).
		Group("tool, known").Order("measured DESC, tool").Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("count retrieval outcomes: %w", err)
	}
	return out, nil
}
