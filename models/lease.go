package models

import (
	"context"
	"fmt"
	"time"
)

// Lease is a named lease on something only one instance may do at a time
// (leading the cluster): Holder holds it until Until, a time on the
// database's clock, and must renew it before then; once Until has passed,
// the first instance to ask takes it. Every time of a lease is the
// database's (now() on Postgres), written and compared there, so the
// instances' clocks need not agree with each other.
type Lease struct {
	Name   string    `gorm:"primaryKey;size:64"`
	Holder string    `gorm:"size:200;not null"`
	Until  time.Time `gorm:"not null"`
}

// takeLease makes holder hold the lease for a number of seconds, from
// now on the database's clock, when nobody holds it, holder already does,
// or its holder let it lapse. Under concurrent callers the upsert takes
// the row's lock, so one of them takes a lapsed lease and the others find
// it held.
const takeLease = `INSERT INTO leases (name, holder, until) VALUES (?, ?, now() + make_interval(secs => ?))
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
WHERE leases.holder = excluded.holder OR leases.until < now()
RETURNING holder`

// TakeLease makes holder hold lease name for ttl when it is free, lapsed
// or holder's already. When another holds it, it returns false and how
// long until that lease lapses (unless renewed), by the database's clock.
// On SQLite, one process's file, every lease is granted: nothing else can
// ask for it.
func (s *Store) TakeLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, time.Duration, error) {
	if !s.dialect.postgres {
		return true, 0, nil
	}
	var taken []string
	if err := s.db.WithContext(ctx).Raw(takeLease, name, holder, ttl.Seconds()).Scan(&taken).Error; err != nil {
		return false, 0, fmt.Errorf("take lease %s: %w", name, err)
	}
	if len(taken) == 1 {
		return true, 0, nil
	}
	var left []float64
	err := s.db.WithContext(ctx).Raw("SELECT EXTRACT(EPOCH FROM until - now())::float8 FROM leases WHERE name = ?", name).Scan(&left).Error
	if err != nil {
		return false, 0, fmt.Errorf("read lease %s: %w", name, err)
	}
	if len(left) == 0 { // released in between: free now
		return false, 0, nil
	}
	return false, max(time.Duration(left[0]*float64(time.Second)), 0), nil
}

// RenewLease makes the lease name that holder holds last ttl from now on
// the database's clock. False when holder no longer holds it (it lapsed,
// or lapsed and another took it): then holder must stop what the lease
// let it do.
func (s *Store) RenewLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if !s.dialect.postgres {
		return true, nil
	}
	res := s.db.WithContext(ctx).Exec("UPDATE leases SET until = now() + make_interval(secs => ?) WHERE name = ? AND holder = ? AND until >= now()",
		ttl.Seconds(), name, holder)
	if res.Error != nil {
		return false, fmt.Errorf("renew lease %s: %w", name, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// ReleaseLease lets the lease name go if holder holds it, so that another
// instance takes it at its next try rather than when it would lapse.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	if !s.dialect.postgres {
		return nil
	}
	if err := s.db.WithContext(ctx).Exec("DELETE FROM leases WHERE name = ? AND holder = ?", name, holder).Error; err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}
