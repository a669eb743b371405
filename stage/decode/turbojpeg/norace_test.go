//go:build !race

package turbojpeg

// raceEnabled reports whether the test binary was built with -race.
const raceEnabled = false
