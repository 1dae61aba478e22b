//go:build race

package services

// raceEnabled: the test binary was built with -race.
const raceEnabled = true
