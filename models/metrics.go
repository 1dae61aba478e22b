package models

import (
	"context"
	"fmt"
)

// CountApprovals returns how many approvals are in a status.
func (s *Store) CountApprovals(ctx context.Context, status string) (int64, error) {
	var n int64
	if err := s.db.WithContext(ctx).Model(&Approval{}).Where("status = ?", status).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("count %s approvals: %w", status, err)
	}
	return n, nil
}
