//go:build !linux

package cgroup

import "fmt"

// SetChildSubreaper is Linux-only; elsewhere it fails with [ErrUnsupported].
func SetChildSubreaper(on bool) error {
	return fmt.Errorf("child subreaper: %w", ErrUnsupported)
}
