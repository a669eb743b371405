//go:build !linux

package addrspace

import "errors"

type rlimits struct{ as, stack int64 }

func limits() (rlimits, error) { return rlimits{as: Unlimited, stack: 8 << 20}, nil }

// CapMallocArenas is Linux-only.
func CapMallocArenas(n int) (bool, error) {
	return false, errors.New("addrspace: malloc arenas are capped on Linux only")
}

// ReexecWithMallocArenas does nothing off Linux.
func ReexecWithMallocArenas(n int) error { return nil }
