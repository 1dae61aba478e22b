package cluster

import (
	"context"
	"testing"
	"time"

	"toolbelt/internal/poll"
)

// The readiness probe of Redis says ok while it answers and degraded, not
// down, while it does not: the instance serves on through Postgres.
func TestRedisCheck(t *testing.T) {
	rs, _, instance := faultyCluster(t)
	check := RedisCheck(instance(t).client)
	ctx := context.Background()
	if c := check(ctx); c.Status != "ok" {
		t.Errorf("redis up: %+v", c)
	}
	rs.Stop()
	if c := check(ctx); c.Status != "degraded" {
		t.Errorf("redis down: %+v; want degraded", c)
	}
	rs.Start()
	poll.True(t, 20*time.Second, "ok again", func() bool { return check(ctx).Status == "ok" })
}
