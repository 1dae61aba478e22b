// Package leaktest tells the tests which goroutines something started:
// take a Snapshot before, ask it what Started after.
package leaktest

import (
	"runtime"
	"strings"
)

// Snapshot is the goroutines alive when it was taken, by header
// ("goroutine 12").
type Snapshot map[string]bool

// Take returns the goroutines alive now.
func Take() Snapshot {
	s := Snapshot{}
	for id := range stacks() {
		s[id] = true
	}
	return s
}

// Started returns the stacks of the goroutines alive now that were not
// when s was taken, but for the caller's and those whose stack contains
// one of ignore.
func (s Snapshot) Started(ignore ...string) []string {
	var out []string
	for id, stack := range stacks() {
		if !s[id] && !containsAny(stack, ignore) {
			out = append(out, stack)
		}
	}
	return out
}

// stacks are the stacks of every goroutine but the caller's, by header.
func stacks() map[string]string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	all := strings.Split(string(buf), "\n\n")
	m := make(map[string]string, len(all))
	for _, stack := range all[1:] {
		id, _, _ := strings.Cut(stack, " [")
		m[id] = stack
	}
	return m
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
