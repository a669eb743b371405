//go:build !race

package decode

// raceEnabled reports whether the test binary was built with -race.
const raceEnabled = false
