package invoke

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"toolbelt/services/redact"
	"toolbelt/services/tooldef"
)

// cache answers a cacheable call from an earlier identical one (same tool
// version, same canonical arguments; for file tools, the same session
// work directory) within the tool's TTL.
func (inv *Invoker) cache(next step) step {
	return func(ctx context.Context, c *call) ToolResult {
		if !c.def.Execution.Cacheable {
			return next(ctx, c)
		}
		key := inv.cacheKey(c, c.args)
		hit, ok := inv.results.Get(key)
		ok = ok && time.Now().Before(hit.expires)
		inv.metrics.CacheLookup(ok)
		if ok {
			c.cached = true
			c.redactedArgs = hit.redactedArgs(inv.redactor, c.args)
			return hit.result
		}
		res := next(ctx, c)
		if res.Success {
			if data, ok := encodedData(res.Data); ok { // once, for every hit
				res.Data, res.dataEncoded = data, true
			}
			inv.results.Add(key, &cachedResult{result: res, expires: time.Now().Add(time.Duration(c.def.Execution.CacheTTL) * time.Millisecond)})
		}
		return res
	}
}

// cacheKey is the results cache's key of a call with these arguments:
// version:sha256(canonical arguments)[:p<principal>:<session>] for file
// tools. It is made once per call (validate's memo and the cache both
// key by it).
func (inv *Invoker) cacheKey(c *call, args map[string]any) string {
	if c.cacheKey != "" {
		return c.cacheKey
	}
	var buf [160]byte
	k := strconv.AppendUint(buf[:0], uint64(c.version), 10)
	k = append(append(k, ':'), argsHash(args)...)
	if c.def.Category == "filesystem" || isFileBuiltin(c.def) {
		k = strconv.AppendUint(append(k, ":p"...), uint64(principalID(c.caller)), 10)
		k = append(append(k, ':'), c.req.SessionID...)
	}
	c.cacheKey = string(k)
	return c.cacheKey
}

// newResultsCache holds up to 8192 results; each also carries its own
// expiry from the tool's cacheTTL.
func newResultsCache() *expirable.LRU[string, *cachedResult] {
	return expirable.NewLRU[string, *cachedResult](8192, nil, tooldef.MaxCacheTTLMs*time.Millisecond)
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
