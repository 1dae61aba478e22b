package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"toolbelt/internal/ttlcache"
	"toolbelt/services/redact"
	"toolbelt/services/tooldef"
)

// cache answers a cacheable call from an earlier identical one within the
// tool's TTL: the same tool version and canonical arguments, made by the
// same principal in the same session unless the tool is free of
// per-caller state (tooldef.CallerFree).
func (inv *Invoker) cache(next step) step {
	return func(ctx context.Context, c *call) ToolResult {
		if !c.def.Execution.Cacheable {
			return next(ctx, c)
		}
		key := inv.cacheKey(c, c.args)
		hit, ok := inv.memo.results.Get(key)
		ok = ok && time.Now().Before(hit.expires)
		if !ok && inv.memo.shared != nil {
			hit, ok = inv.memo.shared.get(ctx, key)
			if ok {
				inv.memo.results.Add(key, hit)
			}
		}
		inv.metrics.CacheLookup(ok)
		if ok {
			c.outcome.cached = true
			c.outcome.redactedArgs = hit.redactedArgs(inv.redactor, c.args)
			return hit.result
		}
		res := next(ctx, c)
		if res.Success {
			if data, ok := encodedData(res.Data); ok { // once, for every hit
				res.Data, res.dataEncoded = data, true
			}
			ttl := time.Duration(c.def.Execution.CacheTTL) * time.Millisecond
			inv.memo.results.Add(key, &cachedResult{result: res, expires: time.Now().Add(ttl)})
			if inv.memo.shared != nil {
				inv.memo.shared.put(ctx, key, res, ttl)
			}
		}
		return res
	}
}

// cacheKey is the results cache's key of a call with these arguments:
// version:sha256(canonical arguments):p<principal>:<session>, without the
// principal and session only for a tool free of per-caller state. A file,
// a command's output, a composite's steps or an upstream's answer may be
// the caller's own: keyed by the tool's category or kind instead, one
// agent's cached result answered another's identical call. It is made
// once per call (validate's memo, the cache and the shared cache in Redis
// all key by it).
func (inv *Invoker) cacheKey(c *call, args map[string]any) string {
	if c.outcome.cacheKey != "" {
		return c.outcome.cacheKey
	}
	var buf [160]byte
	k := strconv.AppendUint(buf[:0], uint64(c.version), 10)
	k = append(append(k, ':'), argsHash(args)...)
	if !tooldef.CallerFree(c.def) {
		k = strconv.AppendUint(append(k, ":p"...), uint64(principalID(c.caller)), 10)
		k = append(append(k, ':'), c.req.SessionID...)
	}
	c.outcome.cacheKey = string(k)
	return c.outcome.cacheKey
}

// newResultsCache holds up to 8192 results; each also carries its own
// expiry from the tool's cacheTTL.
func newResultsCache() *ttlcache.Cache[string, *cachedResult] {
	return ttlcache.New[string, *cachedResult](8192, tooldef.MaxCacheTTLMs*time.Millisecond)
}

// sharedResults is the results cache in Redis (Deps.SharedResults). Each
// instance still holds the results it served in memory until their TTL;
// keys name the tool version, so publishing, rolling back or retiring a
// version makes every instance miss the results of the one it replaced.
// A Redis that does not answer makes a lookup miss and a result go
// unshared: the call is still answered.
type sharedResults struct {
	client *redis.Client
	log    *slog.Logger
}

const sharedResultPrefix = "toolbelt:result:"

func (s *sharedResults) get(ctx context.Context, key string) (*cachedResult, bool) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	pipe := s.client.Pipeline()
	val := pipe.Get(ctx, sharedResultPrefix+key)
	ttl := pipe.PTTL(ctx, sharedResultPrefix+key)
	if _, err := pipe.Exec(ctx); err != nil {
		if !errors.Is(err, redis.Nil) {
			s.log.WarnContext(ctx, "read the shared results cache", "err", err)
		}
		return nil, false
	}
	var res ToolResult
	if err := json.Unmarshal([]byte(val.Val()), &res); err != nil || ttl.Val() <= 0 {
		return nil, false
	}
	res.dataEncoded = len(res.Data) > 0 // stored as encodedData made it
	return &cachedResult{result: res, expires: time.Now().Add(ttl.Val())}, true
}

func (s *sharedResults) put(ctx context.Context, key string, res ToolResult, ttl time.Duration) {
	raw, err := json.Marshal(res)
	if err != nil || (len(res.Data) > 0 && !res.dataEncoded) {
		return // Data that is not JSON stays on this instance
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := s.client.Set(ctx, sharedResultPrefix+key, raw, ttl).Err(); err != nil {
		s.log.WarnContext(ctx, "write the shared results cache", "err", err)
	}
}

// cachedResult is a successful result and when it stops being served.
type cachedResult struct {
	result  ToolResult
	expires time.Time
	// The hits' arguments are the same canonical JSON: they are redacted
	// once for all the history records of the hits.
	argsOnce sync.Once
	args     string
}

func (h *cachedResult) redactedArgs(r *redact.Redactor, args map[string]any) string {
	h.argsOnce.Do(func() {
		raw, _ := json.Marshal(args)
		h.args = string(r.RedactJSON(raw))
	})
	return h.args
}
