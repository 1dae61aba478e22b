package models

import (
	"context"
	"errors"
	"testing"

	"toolbelt/internal/dbtest"
)

// A database that does not answer is UNAVAILABLE, not INTERNAL: while
// Postgres is stopped every query says so; once it is back, a query's
// own error (a bad statement) is INTERNAL again.
func TestUnavailableWhileThePostgresServerIsDown(t *testing.T) {
	pg := dbtest.PostgresServer(t)
	ctx := context.Background()
	store, err := OpenPostgres(ctx, pg.Database(t, "unavailable"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	pg.Stop()
	_, err = store.CallByID(ctx, "x")
	if err == nil || !Unavailable(err) || CodeOf(err) != CodeUnavailable {
		t.Fatalf("a query with the server stopped: %v (unavailable %v, code %s)", err, Unavailable(err), CodeOf(err))
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	err = store.DB().Exec("SELECT * FROM no_such_table").Error
	if err == nil || Unavailable(err) || CodeOf(err) != CodeInternal {
		t.Fatalf("a bad statement once the server is back: %v (unavailable %v)", err, Unavailable(err))
	}
	if Unavailable(errors.New("something else")) {
		t.Fatal("any error is unavailable")
	}
}
