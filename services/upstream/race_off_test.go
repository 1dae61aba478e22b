//go:build !race

package upstream

// raceEnabled: the test binary was built with -race.
const raceEnabled = false
