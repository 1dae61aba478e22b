// Package poll is how tests wait: on the condition they expect, asked
// again and again until a deadline, never for a guessed time.
package poll

import (
	"testing"
	"time"
)

// Interval is how often a condition is asked.
const Interval = 10 * time.Millisecond

// Until asks ok every Interval until it holds, and fails t once within
// has passed, naming what it waited for and what ok last said.
func Until(t testing.TB, within time.Duration, what string, ok func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		done, got := ok()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, within, got)
		}
		time.Sleep(Interval)
	}
}

// True is Until for a condition that has nothing more to say.
func True(t testing.TB, within time.Duration, what string, ok func() bool) {
	t.Helper()
	Until(t, within, what, func() (bool, string) { return ok(), "still not so" })
}
