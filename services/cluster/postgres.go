package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresNotices sends and hears change notices over Postgres
// LISTEN/NOTIFY on connections of their own to the database of url (the
// store's pool is not held by a listener). It is listening when it
// returns; after a lost connection it reconnects and runs every handler,
// since notices sent meanwhile are lost.
func PostgresNotices(ctx context.Context, url string, log *slog.Logger) (*Notices, error) {
	n := newNotices(log)
	listener, err := listen(ctx, url)
	if err != nil {
		return nil, err
	}
	var sendMu sync.Mutex
	var sender *pgx.Conn
	n.send = func(ctx context.Context, payload string) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		if sender == nil || sender.IsClosed() {
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				return fmt.Errorf("connect to send change notices: %w", err)
			}
			sender = conn
		}
		_, err := sender.Exec(ctx, "SELECT pg_notify($1, $2)", channel, payload)
		return err
	}
	run, stop := context.WithCancel(context.Background())
	n.stop = stop
	go func() {
		defer close(n.done)
		defer func() {
			sendMu.Lock()
			if sender != nil {
				_ = sender.Close(context.Background())
			}
			sendMu.Unlock()
		}()
		conn := listener
		for {
			note, err := conn.WaitForNotification(run)
			if err == nil {
				n.heard(note.Payload)
				continue
			}
			_ = conn.Close(context.Background())
			if run.Err() != nil {
				return
			}
			log.Warn("change notices interrupted; reconnecting", "err", err)
			for conn = nil; conn == nil; {
				select {
				case <-run.Done():
					return
				case <-time.After(time.Second):
				}
				if conn, err = listen(run, url); err != nil && !errors.Is(err, context.Canceled) {
					log.Warn("listen for change notices", "err", err)
				}
			}
			n.missed()
		}
	}()
	return n, nil
}

// listen connects to url and listens for change notices.
func listen(ctx context.Context, url string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect to listen for change notices: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("listen for change notices: %w", err)
	}
	return conn, nil
}
