package models

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestUpstreamNetworkColumnUnread: a database written before Egress
// holds upstreams.network, true for a stdio server that shared the host's
// network. Reopened, that server reads with no egress (no network, never
// more than it had), and new servers are stored beside it.
func TestUpstreamNetworkColumnUnread(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "toolbelt.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"ALTER TABLE upstreams ADD COLUMN network boolean NOT NULL DEFAULT false", nil},
		{`INSERT INTO upstreams (name, transport, command, isolation, max_concurrent, idle_seconds, category, network, created_at, updated_at)
			VALUES ('old', 'stdio', '["node","/opt/a/index.js"]', 'shared', 4, 300, 'api', true, ?, ?)`, []any{now, now}},
	} {
		if err := s.db.Exec(q.sql, q.args...).Error; err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if s, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old, err := s.UpstreamByName(ctx, "old")
	if err != nil || len(old.Egress) != 0 {
		t.Fatalf("the old server: %+v, %v; want it with no egress", old, err)
	}
	u := &Upstream{Name: "new", Transport: TransportStdio, Command: []string{"node"}, Egress: []string{"api.github.com"},
		Isolation: IsolationShared, MaxConcurrent: 4, IdleSeconds: 300, Category: "api"}
	if err := s.CreateUpstream(ctx, u); err != nil {
		t.Fatal(err)
	}
	if got, err := s.UpstreamByName(ctx, "new"); err != nil || len(got.Egress) != 1 || got.Egress[0] != "api.github.com" {
		t.Fatalf("the new server: %+v, %v", got, err)
	}
}
