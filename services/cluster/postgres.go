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
// returns: what is sent from then on is heard once Run runs. After a lost
// connection Run reconnects and runs every handler, since notices sent
// meanwhile are lost.
func PostgresNotices(ctx context.Context, url string, log *slog.Logger) (*Notices, error) {
	n := newNotices(log)
	send, l, err := n.listenPostgres(ctx, url)
	if err != nil {
		return nil, err
	}
	n.send = send
	n.listeners = []listener{l}
	return n, nil
}

// listenPostgres listens for the notices on the database of url; the
// listener hears them while it runs. send notifies on a connection of
// its own, closed with the listener.
func (n *Notices) listenPostgres(ctx context.Context, url string) (send func(ctx context.Context, payload string) error, l listener, err error) {
	conn, err := listen(ctx, url)
	if err != nil {
		return nil, l, err
	}
	var sendMu sync.Mutex
	var sender *pgx.Conn
	send = func(ctx context.Context, payload string) error {
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
	// run takes the listening connection; close closes it if run did not.
	var connMu sync.Mutex
	l.run = func(ctx context.Context) {
		connMu.Lock()
		taken := conn
		conn = nil
		connMu.Unlock()
		if taken != nil {
			n.hearPostgres(ctx, url, taken)
		}
	}
	l.close = func() {
		connMu.Lock()
		if conn != nil {
			_ = conn.Close(context.Background())
			conn = nil
		}
		connMu.Unlock()
		sendMu.Lock()
		if sender != nil {
			_ = sender.Close(context.Background())
		}
		sendMu.Unlock()
	}
	return send, l, nil
}

// hearPostgres hears the notices on conn until ctx ends, reconnecting
// to url when the connection is lost; the connection it ends with is
// closed.
func (n *Notices) hearPostgres(ctx context.Context, url string, conn *pgx.Conn) {
	for {
		note, err := conn.WaitForNotification(ctx)
		if err == nil {
			n.heard(note.Payload)
			continue
		}
		_ = conn.Close(context.Background())
		if ctx.Err() != nil {
			return
		}
		n.log.Warn("change notices interrupted; reconnecting", "err", err)
		for conn = nil; conn == nil; {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			if conn, err = listen(ctx, url); err != nil && !errors.Is(err, context.Canceled) {
				n.log.Warn("listen for change notices", "err", err)
			}
		}
		n.missed()
	}
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
