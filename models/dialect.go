package models

import (
	"context"
	"database/sql"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
)

// dialect is everything the store does differently on SQLite and on
// Postgres, in one place. Queries go through gorm, which speaks both; the
// few statements written by hand for speed (the call history's upserts,
// the statistics' scans) and the guarantees SQLite gives for free (one
// writer at a time) are adjusted here and nowhere else.
type dialect struct {
	postgres bool
}

// Engine names the database for /readyz and the start banner.
func (d dialect) engine() string {
	if d.postgres {
		return "postgres"
	}
	return "sqlite (WAL)"
}

// bind rewrites the ? placeholders of a statement written by hand into
// Postgres' $1, $2… (gorm does so for the statements it builds; these go
// to database/sql directly). The statements it is given hold no ? inside
// a string literal.
func (d dialect) bind(q string) string {
	if !d.postgres || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + len(q)/4)
	n := 0
	for i := range len(q) {
		if q[i] != '?' {
			b.WriteByte(q[i])
			continue
		}
		n++
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

// timeArg is a time as a statement written by hand binds it: on SQLite,
// the text go-sqlite3 would store for it, formatted here (AppendTime is
// faster than the driver's generic formatter); on Postgres the time itself,
// sent in binary and kept to the microsecond (timestamptz).
func (d dialect) timeArg(buf []byte, t time.Time) any {
	if d.postgres {
		return t
	}
	return string(AppendTime(buf[:0], t, SQLiteTimeLayout))
}

// serialize makes a read-then-write transaction run alone among those
// that name the same lock, as every write transaction does on SQLite (its
// transactions begin immediate: one writer at a time). On Postgres, whose
// transactions run side by side (read committed), it takes a transaction
// advisory lock on name, released at commit or rollback; it must be the
// transaction's first statement, so what the transaction reads next was
// committed before the lock was granted. Several instances over one
// database are serialized alike.
func (d dialect) serialize(tx *gorm.DB, name string) error {
	if !d.postgres {
		return nil
	}
	return tx.Exec("SELECT pg_advisory_xact_lock(?)", lockKey(name)).Error
}

// lockKey is an advisory lock's 64-bit key for name. Toolbelt's names
// start with "toolbelt:", so they stay apart from other users of advisory
// locks in a shared database (barring a 64-bit hash collision).
func lockKey(name string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("toolbelt:" + name))
	return int64(h.Sum64())
}

// migrationLock names the lock held while the schema is migrated.
const migrationLock = "migrate"

// lockedMigration runs migrate so that instances starting at once over one
// Postgres database migrate one after the other: in one transaction (DDL
// is transactional there, so a failed migration leaves the schema as it
// was) holding the migration's advisory lock, so the second finds the
// schema made and changes nothing. SQLite is one process's file: it
// migrates as is.
func (d dialect) lockedMigration(ctx context.Context, db *gorm.DB, migrate func(*gorm.DB) error) error {
	if !d.postgres {
		return migrate(db.WithContext(ctx))
	}
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := d.serialize(tx, migrationLock); err != nil {
			return err
		}
		return migrate(tx)
	}, &sql.TxOptions{})
}
