package models

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// CallStat is what the usage statistics read of one call.
type CallStat struct {
	Tool      string
	Status    string
	ErrorCode string
	Cached    bool
	TotalMs   int64
}

const scanCallStatsSQL = `SELECT tool, status || ' ' || error_code, total_ms * 2 + CASE WHEN cached THEN 1 ELSE 0 END
FROM calls WHERE created_at >= ? AND created_at < ?`

// ScanCallStats calls fn with every call created in [since, until), in no
// particular order.
//
// It is the statistics' one scan of rows, so it reads little: three
// columns (status with error code, and duration with the cache flag, are
// packed in SQL that SQLite and Postgres share), answered by the covering
// index idx_calls_stats without reading the table, and each distinct
// string is allocated once per scan.
func (s *Store) ScanCallStats(ctx context.Context, since, until time.Time, fn func(CallStat)) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return fmt.Errorf("scan calls: %w", err)
	}
	rows, err := sqlDB.QueryContext(ctx, s.dialect.bind(scanCallStatsSQL), since.UTC(), until.UTC())
	if err != nil {
		return fmt.Errorf("scan calls: %w", err)
	}
	defer rows.Close()
	tools := map[string]string{}
	outcomes := map[string][2]string{}
	var (
		tool, outcome sql.RawBytes
		packed        int64
	)
	for rows.Next() {
		if err := rows.Scan(&tool, &outcome, &packed); err != nil {
			return fmt.Errorf("scan calls: %w", err)
		}
		name, ok := tools[string(tool)]
		if !ok {
			name = string(tool)
			tools[name] = name
		}
		o, ok := outcomes[string(outcome)]
		if !ok {
			status, code, _ := strings.Cut(string(outcome), " ")
			o = [2]string{status, code}
			outcomes[string(outcome)] = o
		}
		fn(CallStat{Tool: name, Status: o[0], ErrorCode: o[1], Cached: packed&1 == 1, TotalMs: packed >> 1})
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("scan calls: %w", err)
	}
	return nil
}

// ToolOutcome counts the calls of a tool that ran to an end (succeeded,
// failed or interrupted: not the refused or denied, which no tool ran;
// NothingRan) and how many of them did not succeed.
type ToolOutcome struct {
	Tool     string
	Finished int64
	Failed   int64
}

// ToolOutcomes counts, per tool, the calls created in [since, until) that
// ran to an end, and those of them that did not succeed.
func (s *Store) ToolOutcomes(ctx context.Context, since, until time.Time) ([]ToolOutcome, error) {
	var out []ToolOutcome
	err := s.db.WithContext(ctx).Raw(`SELECT tool, COUNT(*) AS finished, SUM(CASE WHEN status <> 'succeeded' THEN 1 ELSE 0 END) AS failed
FROM calls WHERE created_at >= ? AND created_at < ? AND NOT (`+openCalls+`) AND NOT `+nothingRanSQL+` GROUP BY tool`, since.UTC(), until.UTC()).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("count call outcomes: %w", err)
	}
	return out, nil
}

// CountCallsBetween counts the calls created between consecutive bounds:
// out[i] is the number in [bounds[i], bounds[i+1]). It is one statement of
// index range counts, cheap enough to tell which parts of the history
// changed since they were last read.
func (s *Store) CountCallsBetween(ctx context.Context, bounds []time.Time) ([]int64, error) {
	if len(bounds) < 2 {
		return nil, nil
	}
	var b strings.Builder
	args := make([]any, 0, 2*len(bounds))
	b.WriteString("SELECT ")
	for i := range len(bounds) - 1 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(SELECT COUNT(*) FROM calls WHERE created_at >= ? AND created_at < ?)")
		args = append(args, bounds[i].UTC(), bounds[i+1].UTC())
	}
	out := make([]int64, len(bounds)-1)
	ptrs := make([]any, len(out))
	for i := range out {
		ptrs[i] = &out[i]
	}
	sqlDB, err := s.db.DB()
	if err == nil {
		err = sqlDB.QueryRowContext(ctx, s.dialect.bind(b.String()), args...).Scan(ptrs...)
	}
	if err != nil {
		return nil, fmt.Errorf("count calls: %w", err)
	}
	return out, nil
}

// CountPendingApprovals counts approvals still waiting for a decision at
// now (an expired one no longer waits, even before the sweep marks it).
func (s *Store) CountPendingApprovals(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&Approval{}).Where("status = ? AND expires_at > ?", ApprovalPending, now.UTC()).Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("count pending approvals: %w", err)
	}
	return n, nil
}

// The queries above read the covering index idx_calls_stats (see
// callIndexes): a time window is a range of the index, never a read of the
// table.
