package models

import (
	"context"
	"fmt"
	"time"
)

// RateCount is one rate-limit window counted in the database: what
// several instances over one Postgres share (with or without Redis, so a
// count survives a Redis outage or restart), so a tool's maxCalls and the
// key-guess limit hold cluster-wide (one statement a count). Name is the limiter's key; ExpiresMs,
// when the window ends, in Unix milliseconds (an integer, so that SQLite
// compares it as Postgres does).
type RateCount struct {
	Name      string `gorm:"primaryKey;size:400"`
	Count     int64  `gorm:"not null"`
	ExpiresMs int64  `gorm:"not null;index"`
}

// incrementRate is the one statement that counts: a new window starts
// when there is none or the last has ended, else the count grows. Under
// concurrent callers on Postgres the upsert takes the row's lock, so
// every count is seen once.
const incrementRate = `INSERT INTO rate_counts (name, count, expires_ms) VALUES (?, ?, ?)
ON CONFLICT (name) DO UPDATE SET
	count = CASE WHEN rate_counts.expires_ms <= ? THEN excluded.count ELSE rate_counts.count + excluded.count END,
	expires_ms = CASE WHEN rate_counts.expires_ms <= ? THEN excluded.expires_ms ELSE rate_counts.expires_ms END
RETURNING count, expires_ms`

// IncrementRate adds by to the count of name's window of length period
// as of now, starting a new window when the last has ended, and returns
// the count and when the window ends.
func (s *Store) IncrementRate(ctx context.Context, name string, by int64, period time.Duration, now time.Time) (int64, time.Time, error) {
	if period <= 0 {
		return 0, time.Time{}, fmt.Errorf("rate window of %s: must be positive", period)
	}
	nowMs := now.UnixMilli()
	var out struct {
		Count     int64
		ExpiresMs int64
	}
	err := s.db.WithContext(ctx).Raw(s.dialect.bind(incrementRate), name, by, nowMs+period.Milliseconds(), nowMs, nowMs).Scan(&out).Error
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("count rate %s: %w", name, err)
	}
	return out.Count, time.UnixMilli(out.ExpiresMs), nil
}

// PeekRate returns name's count and the end of its window as of now
// without counting (0 and the zero time when no window is open).
func (s *Store) PeekRate(ctx context.Context, name string, now time.Time) (int64, time.Time, error) {
	var rows []RateCount
	if err := s.db.WithContext(ctx).Where("name = ? AND expires_ms > ?", name, now.UnixMilli()).Limit(1).Find(&rows).Error; err != nil {
		return 0, time.Time{}, fmt.Errorf("read rate %s: %w", name, err)
	}
	if len(rows) == 0 {
		return 0, time.Time{}, nil
	}
	return rows[0].Count, time.UnixMilli(rows[0].ExpiresMs), nil
}

// ResetRate forgets name's window.
func (s *Store) ResetRate(ctx context.Context, name string) error {
	if err := s.db.WithContext(ctx).Where("name = ?", name).Delete(&RateCount{}).Error; err != nil {
		return fmt.Errorf("reset rate %s: %w", name, err)
	}
	return nil
}

// PruneRates deletes the windows that ended before now, and says how many.
func (s *Store) PruneRates(ctx context.Context, now time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("expires_ms <= ?", now.UnixMilli()).Delete(&RateCount{})
	if res.Error != nil {
		return 0, fmt.Errorf("prune rate windows: %w", res.Error)
	}
	return res.RowsAffected, nil
}
