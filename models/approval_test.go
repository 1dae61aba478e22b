package models

import (
	"context"
	"testing"
	"time"
)

// TestUseApproval: an approval runs its own call only, once approved;
// spending it again for that call (a first answer lost) is not a refusal.
func TestUseApproval(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		for _, a := range []*Approval{
			{ID: "ap-approved", CallID: "c1", Status: ApprovalApproved},
			{ID: "ap-pending", CallID: "c2", Status: ApprovalPending},
			{ID: "ap-denied", CallID: "c3", Status: ApprovalDenied},
		} {
			a.ExpiresAt = time.Now().Add(time.Hour)
			if err := s.db.Create(a).Error; err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			id, call string
			want     bool
		}{
			{"ap-approved", "c2", false}, // another call's approval
			{"ap-approved", "c1", true},
			{"ap-approved", "c1", true}, // spent again by its own call
			{"ap-approved", "c9", false},
			{"ap-pending", "c2", false},
			{"ap-denied", "c3", false},
			{"ap-missing", "c1", false},
		} {
			if ok, err := s.UseApproval(ctx, tc.id, tc.call); err != nil || ok != tc.want {
				t.Errorf("UseApproval(%s, %s) = %v, %v; want %v", tc.id, tc.call, ok, err, tc.want)
			}
		}
		for id, want := range map[string]string{"ap-approved": ApprovalUsed, "ap-pending": ApprovalPending, "ap-denied": ApprovalDenied} {
			var a Approval
			if err := s.db.First(&a, "id = ?", id).Error; err != nil || a.Status != want {
				t.Errorf("%s is %s (%v), want %s", id, a.Status, err, want)
			}
		}
	})
}
