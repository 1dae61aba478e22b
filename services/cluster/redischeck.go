package cluster

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"toolbelt/services/ops"
)

// RedisCheck is the readiness probe of Redis for ops.Health: ok while
// Redis answers PING within a second; else degraded, "down (falling back
// to Postgres)", and never down, since the instance serves on without
// Redis and stays ready.
func RedisCheck(client *redis.Client) func(context.Context) ops.Component {
	return func(ctx context.Context) ops.Component {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := client.Ping(ctx).Err(); err != nil {
			return ops.Component{Status: "degraded", Detail: "down (falling back to Postgres): " + err.Error()}
		}
		return ops.Component{Status: "ok"}
	}
}
