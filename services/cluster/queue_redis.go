package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"toolbelt/models"
)

// redisQueues keep the queues in Redis, four keys a category (the braces
// keep them in one slot of a Redis Cluster):
//
//	toolbelt:queue:{cat}:holders  ZSET token → lease expiry (ms): the slots held
//	toolbelt:queue:{cat}:waiters  ZSET token → ticket: the places in line, in order
//	toolbelt:queue:{cat}:leases   ZSET token → lease expiry (ms) of each place
//	toolbelt:queue:{cat}:ticket   the ticket counter (INCR)
//
// Each step is one Lua script, so it is atomic, and reads Redis' clock
// (TIME), so the instances' clocks need not agree: the pattern of the
// "fair semaphore" of Redis in Action (holders scored by time beside a
// counter-scored set), with holders scored by lease expiry as in
// heartbeat-renewed semaphores, and a waiting list in ticket order.
type redisQueues struct {
	client *redis.Client
	self   string // the notices' name of this instance, which skips its own
	// The scripts of take, renew, release and depth.
	takeScript, renewScript, releaseScript, depthScript *redis.Script
}

func newRedisQueues(client *redis.Client, self string) *redisQueues {
	return &redisQueues{client: client, self: self,
		takeScript: redis.NewScript(redisNow + takeLua), renewScript: redis.NewScript(redisNow + renewLua),
		releaseScript: redis.NewScript(releaseLua), depthScript: redis.NewScript(redisNow + depthLua)}
}

func queueKeys(category string) []string {
	p := "toolbelt:queue:{" + category + "}:"
	return []string{p + "holders", p + "waiters", p + "leases", p + "ticket"}
}

// redisNow is the scripts' clock: Redis' time in ms. Before Redis 5 a
// script that reads the time and then writes must ask for its effects to
// be replicated, not the script.
const redisNow = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// takeLua is models.Store.TakeSlot in Redis. ARGV: token, limit,
// maxWait, lease (ms). It answers a models.Admission: 0 waiting, 1 held,
// 2 full.
const takeLua = `
local token, limit, maxWait, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
while true do
  local lapsed = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. now, 'LIMIT', 0, 500)
  if #lapsed == 0 then break end
  redis.call('ZREM', KEYS[2], unpack(lapsed))
  redis.call('ZREM', KEYS[3], unpack(lapsed))
end
if redis.call('ZSCORE', KEYS[1], token) then
  redis.call('ZADD', KEYS[1], now + lease, token)
  return 1
end
local holding = redis.call('ZCARD', KEYS[1])
local rank = redis.call('ZRANK', KEYS[2], token)
if rank then
  if rank < limit - holding then
    redis.call('ZREM', KEYS[2], token)
    redis.call('ZREM', KEYS[3], token)
    redis.call('ZADD', KEYS[1], now + lease, token)
    return 1
  end
  redis.call('ZADD', KEYS[3], now + lease, token)
  return 0
end
local waiting = redis.call('ZCARD', KEYS[2])
if waiting == 0 and holding < limit then
  redis.call('ZADD', KEYS[1], now + lease, token)
  return 1
end
if waiting >= maxWait then
  return 2
end
redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[4]), token)
redis.call('ZADD', KEYS[3], now + lease, token)
return 0
`

// renewLua extends a held slot's lease, taking it back if it lapsed
// (the call still runs). ARGV: token, lease (ms). 1 when it was held.
const renewLua = `
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
if expiry and tonumber(expiry) >= now then return 1 end
return 0
`

// releaseLua gives up token's slot or place and, if it had one and
// calls wait, publishes the change notice message that wakes the other
// instances' waiters (a release nobody waits for wakes nobody). ARGV:
// token, channel, message.
const releaseLua = `
local n = redis.call('ZREM', KEYS[1], ARGV[1]) + redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if n > 0 and redis.call('ZCARD', KEYS[2]) > 0 then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
return n
`

// depthLua counts the live slots and places.
const depthLua = `
return {redis.call('ZCOUNT', KEYS[1], now, '+inf'), redis.call('ZCOUNT', KEYS[3], now, '+inf')}
`

func (b *redisQueues) take(ctx context.Context, r models.SlotRequest) (models.Admission, error) {
	n, err := b.takeScript.Run(ctx, b.client, queueKeys(r.Category), r.Token, r.Limit, r.MaxWait, r.Lease.Milliseconds()).Int()
	if err != nil {
		return models.SlotWaiting, fmt.Errorf("take a slot of %s: %w", r.Category, err)
	}
	return models.Admission(n), nil
}

func (b *redisQueues) renew(ctx context.Context, category, token string, lease time.Duration) (bool, error) {
	n, err := b.renewScript.Run(ctx, b.client, queueKeys(category), token, lease.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("renew the slot of %s: %w", category, err)
	}
	return n == 1, nil
}

func (b *redisQueues) release(ctx context.Context, category, token string) error {
	err := b.releaseScript.Run(ctx, b.client, queueKeys(category), token, channel, topicQueueFree+" "+b.self+" "+category).Err()
	if err != nil {
		return fmt.Errorf("release a slot of %s: %w", category, err)
	}
	return nil
}

func (b *redisQueues) depth(ctx context.Context, category string) (int64, int64, error) {
	counts, err := b.depthScript.Run(ctx, b.client, queueKeys(category)).Int64Slice()
	if err != nil || len(counts) != 2 {
		return 0, 0, fmt.Errorf("count the queue of %s: %v", category, err)
	}
	return counts[0], counts[1], nil
}
