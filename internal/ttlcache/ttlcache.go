// Package ttlcache is a cache of a fixed size whose entries expire: the
// least recently used entry goes when it is full, and an entry older than
// its time to live is missed. It starts no goroutine: an expired entry
// stays until it is replaced or pushed out. (golang-lru's expirable cache
// starts a cleaner that never ends, one per cache.)
package ttlcache

import (
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Cache maps keys to values for ttl after each Add. It is safe for
// concurrent use.
type Cache[K comparable, V any] struct {
	lru *lru.Cache[K, entry[V]]
	ttl time.Duration
	now func() time.Time // time.Now; tests move it
}

type entry[V any] struct {
	value   V
	expires time.Time
}

// New returns a cache of size entries (at least one), each kept for ttl.
func New[K comparable, V any](size int, ttl time.Duration) *Cache[K, V] {
	c, _ := lru.New[K, entry[V]](max(size, 1)) // fails only for a size below one
	return &Cache[K, V]{lru: c, ttl: ttl, now: time.Now}
}

// Add sets key's value for the next ttl.
func (c *Cache[K, V]) Add(key K, value V) {
	c.lru.Add(key, entry[V]{value: value, expires: c.now().Add(c.ttl)})
}

// Get returns key's value unless it is missing or expired.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	e, ok := c.lru.Get(key)
	if !ok || !c.now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// Purge removes every entry.
func (c *Cache[K, V]) Purge() { c.lru.Purge() }
