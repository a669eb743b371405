//go:build !race

package imagefolder

const raceEnabled = false
