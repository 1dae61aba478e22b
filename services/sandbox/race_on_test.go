//go:build race

package sandbox

// raceEnabled: the test binary was built with -race.
const raceEnabled = true
