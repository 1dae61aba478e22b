package audit

import (
	"errors"
	"strings"
	"testing"
	"time"

	"toolbelt/models"
)

// TestQueryFilter: what a person or client types becomes the store's
// filter, and anything that cannot be a filter is ErrInvalid naming the
// parameter, quoting at most 40 characters of the value.
func TestQueryFilter(t *testing.T) {
	long := strings.Repeat("x", 10_000)
	for _, tc := range []struct {
		name    string
		q       Query
		want    models.AuditFilter
		wantErr string
	}{
		{"empty", Query{}, models.AuditFilter{Limit: 50}, ""},
		{"every field", Query{Actor: " bob ", Action: "key.revoke", Target: "key:3", Since: "2026-12-01T10:00:00+01:00", Until: "2026-12-02", Sort: "-target", Cursor: "41", Limit: 10},
			models.AuditFilter{Actor: "bob", Action: "key.revoke", Target: "key:3", Since: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC),
				Until: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), Sort: "-target", After: 41, Limit: 10}, ""},
		{"a browser's date and time", Query{Since: "2026-12-01T10:30"}, models.AuditFilter{Since: time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC), Limit: 50}, ""},
		{"system", Query{Actor: "system"}, models.AuditFilter{Actor: "system", Limit: 50}, ""},
		{"quote in actor", Query{Actor: "a' OR '1'='1"}, models.AuditFilter{}, "actor="},
		{"long actor", Query{Actor: long}, models.AuditFilter{}, "actor="},
		{"unknown action", Query{Action: "key.steal"}, models.AuditFilter{}, `action="key.steal" is not an action; the key actions are key.issue, key.revoke`},
		{"unknown subject", Query{Action: "drop table"}, models.AuditFilter{}, `action="drop table" is not an action; use an action of tool, principal, key,`},
		{"space in target", Query{Target: "tool:a b"}, models.AuditFilter{}, "target="},
		{"long target", Query{Target: "tool:" + long}, models.AuditFilter{}, "target="},
		{"control in target", Query{Target: "tool:\x1b[2J"}, models.AuditFilter{}, "target="},
		{"bad since", Query{Since: "last week"}, models.AuditFilter{}, "since="},
		{"bad until", Query{Until: "2026-02-30"}, models.AuditFilter{}, "until="},
		{"empty range", Query{Since: "2026-12-02", Until: "2026-12-01"}, models.AuditFilter{}, "since must be before until"},
		{"bad cursor", Query{Cursor: "1 OR 1"}, models.AuditFilter{}, "cursor="},
		{"zero cursor", Query{Cursor: "0"}, models.AuditFilter{}, "cursor="},
		{"unknown order", Query{Sort: "id DESC"}, models.AuditFilter{}, `sort="id DESC" is not an order`},
		{"limit too big", Query{Limit: MaxLimit + 1}, models.AuditFilter{}, "limit="},
		{"negative limit", Query{Limit: -1}, models.AuditFilter{}, "limit="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.q.Filter()
			if tc.wantErr != "" {
				if !errors.Is(err, models.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) || len(err.Error()) > 400 {
					t.Errorf("error %v, want ErrInvalid naming %q, short", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("filter %+v (%v), want %+v", got, err, tc.want)
			}
		})
	}
}
