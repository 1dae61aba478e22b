package models

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gorm.io/gorm"

	"toolbelt/internal/dbtest"
)

// TestFullDisk: each engine's own "disk full" and the system's ENOSPC,
// as the engines and the kernel raise them, answer STORAGE_FULL naming
// which disk; the engines' other failures stay INTERNAL.
func TestFullDisk(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, err error, disk string) {
		t.Helper()
		if err == nil {
			t.Fatal("no error")
		}
		err = fmt.Errorf("save the thing: %w", err)
		if got := CodeOf(err); got != CodeStorageFull {
			t.Errorf("CodeOf(%v) = %s", err, got)
		}
		if got := FullDisk(err); !strings.Contains(got, disk) {
			t.Errorf("FullDisk(%v) = %q, want it to name %s", err, got, disk)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		store := opened(t)(Open(ctx, filepath.Join(t.TempDir(), "toolbelt.db")))
		// A database held to the pages it has is full to SQLite as on a
		// full disk: SQLITE_FULL.
		err := store.DB().Connection(func(db *gorm.DB) error {
			if err := db.Exec("CREATE TABLE filler (b BLOB)").Error; err != nil {
				return err
			}
			var pages int
			if err := db.Raw("PRAGMA page_count").Scan(&pages).Error; err != nil {
				return err
			}
			if err := db.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", pages)).Error; err != nil {
				return err
			}
			return db.Exec("INSERT INTO filler VALUES (zeroblob(1048576))").Error
		})
		check(t, err, "SQLite")
		if err := store.DB().Exec("SELECT * FROM no_such_table").Error; CodeOf(err) != CodeInternal {
			t.Errorf("another SQLite error: %s (%v)", CodeOf(err), err)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		store := opened(t)(OpenPostgres(ctx, dbtest.Postgres(t)))
		err := store.DB().Exec(`DO $$ BEGIN RAISE EXCEPTION 'could not extend file' USING ERRCODE = 'disk_full'; END $$`).Error
		check(t, err, "Postgres")
		err = store.DB().Exec(`DO $$ BEGIN RAISE EXCEPTION 'read failed' USING ERRCODE = 'io_error'; END $$`).Error
		if CodeOf(err) != CodeInternal {
			t.Errorf("another Postgres error: %s (%v)", CodeOf(err), err)
		}
	})
	t.Run("enospc", func(t *testing.T) {
		f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
		if err != nil {
			t.Skipf("no /dev/full: %v", err)
		}
		defer f.Close()
		_, err = f.Write([]byte("a record"))
		check(t, err, "data directory")
		if err := errors.New("no space left on device"); CodeOf(err) != CodeInternal {
			t.Error("a message alone is taken for a full disk")
		}
	})
}
