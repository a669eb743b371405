//go:build !linux || !cgo

package main

import "context"

// probeNVML reports that this build cannot use NVML: go-nvml needs cgo (and Linux).
func probeNVML(ctx context.Context) (bool, string) {
	return false, "built without cgo (or not on Linux): go-nvml needs cgo to load libnvidia-ml"
}
