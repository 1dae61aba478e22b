package models

import (
	"context"
	"fmt"
)

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
