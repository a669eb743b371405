//go:build race

package imagefolder

// raceEnabled: the race detector's shadow memory multiplies every process's
// footprint, which a test of memory sharing cannot ignore.
const raceEnabled = true
