package ttlcache

import (
	"runtime"
	"testing"
	"time"
)

// An entry is found until its time to live passes, the least recently
// used goes when the cache is full, and no goroutine is started.
func TestCache(t *testing.T) {
	before := runtime.NumGoroutine()
	c := New[string, int](2, time.Minute)
	if n := runtime.NumGoroutine(); n != before {
		t.Errorf("New started %d goroutines", n-before)
	}
	now := time.Now()
	c.now = func() time.Time { return now }
	c.Add("a", 1)
	c.Add("b", 2)
	if v, ok := c.Get("a"); !ok || v != 1 {
		t.Errorf("a: %d %v", v, ok)
	}
	c.Add("c", 3) // b is the least recently used
	if _, ok := c.Get("b"); ok {
		t.Error("b was kept past the size")
	}
	now = now.Add(time.Minute)
	if _, ok := c.Get("a"); ok {
		t.Error("a was found past its time to live")
	}
	c.Add("a", 4)
	if v, ok := c.Get("a"); !ok || v != 4 {
		t.Errorf("a added again: %d %v", v, ok)
	}
	c.Purge()
	if _, ok := c.Get("a"); ok {
		t.Error("a was found after Purge")
	}
}
