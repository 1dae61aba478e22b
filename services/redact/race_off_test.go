//go:build !race

package redact

// raceEnabled: the test binary was built with -race.
const raceEnabled = false
