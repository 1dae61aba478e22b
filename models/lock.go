package models

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"
)

// SessionLock is a Postgres session advisory lock, held on a connection
// of its own for as long as it is held: Postgres releases it when that
// connection ends, so a holder that dies (killed, cut off) lets another
// take it at once. It serializes work, never grants a role: a frozen
// holder's session lives on, and so does its lock (leadership is a
// Lease). On SQLite, one process's file, every lock is granted and holds
// until released.
type SessionLock struct {
	conn *sql.Conn // nil on SQLite
	key  int64
}

// Exclusive runs fn holding the session lock name, waiting for it, so
// that instances doing the same work at once (applying the tool files at
// start) do it one after the other.
func (s *Store) Exclusive(ctx context.Context, name string, fn func() error) error {
	l, err := s.lock(ctx, name)
	if err != nil {
		return err
	}
	defer l.Release()
	return fn()
}

// lock takes lock name on a connection of its own, waiting for it.
func (s *Store) lock(ctx context.Context, name string) (*SessionLock, error) {
	if !s.dialect.postgres {
		return &SessionLock{}, nil
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		return nil, err
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	l := &SessionLock{conn: conn, key: lockKey(name)}
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", l.key); err != nil {
		l.discard()
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return l, nil
}

// Release lets the lock go: unlocked, and its connection closed rather
// than returned to the pool, so no lock can outlive its holder on a
// pooled connection.
func (l *SessionLock) Release() {
	if l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = l.conn.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", l.key)
	l.discard()
}

// discard closes the lock's connection for good (driver.ErrBadConn from
// Raw tells database/sql to drop it).
func (l *SessionLock) discard() {
	_ = l.conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = l.conn.Close()
}
