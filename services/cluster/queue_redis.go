package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"toolbelt/models"
)

// redisQueues keep the queues in Redis, five keys a category (the braces
// keep them in one slot of a Redis Cluster):
//
//	toolbelt:queue:{cat}:holders  ZSET token → lease expiry (ms): the slots held
//	toolbelt:queue:{cat}:waiters  ZSET token → ticket: the places in line, in order
//	toolbelt:queue:{cat}:leases   ZSET token → lease expiry (ms) of each place
//	toolbelt:queue:{cat}:ticket   the ticket counter (INCR)
//	toolbelt:queue:{cat}:owners   HASH token → principal of each slot and place
//
// Each step is one Lua script, so it is atomic, and reads Redis' clock
// (TIME), so the instances' clocks need not agree: the pattern of the
// "fair semaphore" of Redis in Action (holders scored by time beside a
// counter-scored set), with holders scored by lease expiry as in
// heartbeat-renewed semaphores, and a waiting list in ticket order.
type redisQueues struct {
	client *redis.Client
	self   string // the notices' name of this instance, which skips its own
	// The scripts of take, renew, release, depth and waiting.
	takeScript, renewScript, releaseScript, depthScript, waitingScript *redis.Script
}

func newRedisQueues(client *redis.Client, self string) *redisQueues {
	return &redisQueues{client: client, self: self,
		takeScript: redis.NewScript(redisNow + takeLua), renewScript: redis.NewScript(redisNow + renewLua),
		releaseScript: redis.NewScript(releaseLua), depthScript: redis.NewScript(redisNow + depthLua),
		waitingScript: redis.NewScript(redisNow + waitingLua)}
}

func queueKeys(category string) []string {
	p := "toolbelt:queue:{" + category + "}:"
	return []string{p + "holders", p + "waiters", p + "leases", p + "ticket", p + "owners"}
}

// redisNow is the scripts' clock: Redis' time in ms. Before Redis 5 a
// script that reads the time and then writes must ask for its effects to
// be replicated, not the script.
const redisNow = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// takeLua is models.Store.TakeSlot in Redis, with models.FairOrder
// written again in Lua. ARGV: token, limit, maxWait, lease (ms),
// principal, maxWaitEach (0: none). It answers a models.Admission: 0
// waiting, 1 held, 2 full, 3 the principal's bound reached.
const takeLua = `
local token, limit, maxWait, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local principal, maxWaitEach = ARGV[5], tonumber(ARGV[6])
while true do
  local lapsed = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. now, 'LIMIT', 0, 500)
  if #lapsed == 0 then break end
  redis.call('ZREM', KEYS[1], unpack(lapsed))
  redis.call('HDEL', KEYS[5], unpack(lapsed))
end
while true do
  local lapsed = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. now, 'LIMIT', 0, 500)
  if #lapsed == 0 then break end
  redis.call('ZREM', KEYS[2], unpack(lapsed))
  redis.call('ZREM', KEYS[3], unpack(lapsed))
  redis.call('HDEL', KEYS[5], unpack(lapsed))
end
if redis.call('ZSCORE', KEYS[1], token) then
  redis.call('ZADD', KEYS[1], now + lease, token)
  return 1
end
local holders = redis.call('ZRANGE', KEYS[1], 0, -1)
local waiters = redis.call('ZRANGE', KEYS[2], 0, -1)
local function owners(tokens)
  if #tokens == 0 then return {} end
  return redis.call('HMGET', KEYS[5], unpack(tokens))
end
local held = {}
for _, p in ipairs(owners(holders)) do
  p = p or ''
  held[p] = (held[p] or 0) + 1
end
local whose = owners(waiters)
if redis.call('ZSCORE', KEYS[2], token) then
  local given = {}
  for _ = 1, limit - #holders do
    local best
    for i = 1, #waiters do
      local p = whose[i] or ''
      if not given[i] and (best == nil or (held[p] or 0) < (held[whose[best] or ''] or 0)) then best = i end
    end
    if best == nil then break end
    if waiters[best] == token then
      redis.call('ZREM', KEYS[2], token)
      redis.call('ZREM', KEYS[3], token)
      redis.call('ZADD', KEYS[1], now + lease, token)
      return 1
    end
    given[best] = true
    local p = whose[best] or ''
    held[p] = (held[p] or 0) + 1
  end
  redis.call('ZADD', KEYS[3], now + lease, token)
  return 0
end
if #waiters == 0 and #holders < limit then
  redis.call('ZADD', KEYS[1], now + lease, token)
  redis.call('HSET', KEYS[5], token, principal)
  return 1
end
if #waiters >= maxWait then
  return 2
end
if maxWaitEach > 0 then
  local mine = 0
  for i = 1, #waiters do
    if whose[i] == principal then mine = mine + 1 end
  end
  if mine >= maxWaitEach then return 3 end
end
redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[4]), token)
redis.call('ZADD', KEYS[3], now + lease, token)
redis.call('HSET', KEYS[5], token, principal)
return 0
`

// renewLua extends a held slot's lease, taking it back if it lapsed
// (the call still runs). ARGV: token, lease (ms), principal. 1 when it
// was held.
const renewLua = `
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('HSET', KEYS[5], ARGV[1], ARGV[3])
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
redis.call('HDEL', KEYS[5], ARGV[1])
if n > 0 and redis.call('ZCARD', KEYS[2]) > 0 then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
return n
`

// waitingLua counts the live slots and places, and the places of a principal (ARGV[1])
// among them.
const waitingLua = `
local live = redis.call('ZRANGEBYSCORE', KEYS[3], now, '+inf')
local mine = 0
if #live > 0 then
  for _, p in ipairs(redis.call('HMGET', KEYS[5], unpack(live))) do
    if p == ARGV[1] then mine = mine + 1 end
  end
end
return {redis.call('ZCOUNT', KEYS[1], now, '+inf'), #live, mine}
`

// depthLua counts the live slots and places.
const depthLua = `
return {redis.call('ZCOUNT', KEYS[1], now, '+inf'), redis.call('ZCOUNT', KEYS[3], now, '+inf')}
`

func (b *redisQueues) take(ctx context.Context, r models.SlotRequest) (models.Admission, error) {
	n, err := b.takeScript.Run(ctx, b.client, queueKeys(r.Category), r.Token, r.Limit, r.MaxWait, r.Lease.Milliseconds(),
		r.Principal, r.MaxWaitEach).Int()
	if err != nil {
		return models.SlotWaiting, fmt.Errorf("take a slot of %s: %w", r.Category, err)
	}
	return models.Admission(n), nil
}

func (b *redisQueues) renew(ctx context.Context, category, token, principal string, lease time.Duration) (bool, error) {
	n, err := b.renewScript.Run(ctx, b.client, queueKeys(category), token, lease.Milliseconds(), principal).Int()
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

func (b *redisQueues) line(ctx context.Context, category, principal string) (Line, error) {
	counts, err := b.waitingScript.Run(ctx, b.client, queueKeys(category), principal).Int64Slice()
	if err != nil || len(counts) != 3 {
		return Line{}, fmt.Errorf("count the queue of %s: %v", category, err)
	}
	return Line{Holding: counts[0], Waiting: counts[1], Mine: counts[2]}, nil
}
