//go:build !linux

package cgroup

import (
	"context"
	"fmt"
	"time"
)

// SetChildSubreaper is Linux-only; elsewhere it fails with [ErrUnsupported].
func SetChildSubreaper(on bool) error {
	return fmt.Errorf("child subreaper: %w", ErrUnsupported)
}

// IsChildSubreaper is Linux-only; elsewhere it fails with [ErrUnsupported].
func IsChildSubreaper() (bool, error) {
	return false, fmt.Errorf("child subreaper: %w", ErrUnsupported)
}

// Run is Linux-only; elsewhere it fails with [ErrUnsupported].
func (r *Reaper) Run(ctx context.Context, interval time.Duration) error {
	return fmt.Errorf("reaper: %w", ErrUnsupported)
}

// ReapOnce is Linux-only; elsewhere it fails with [ErrUnsupported].
func (r *Reaper) ReapOnce() (int, error) {
	return 0, fmt.Errorf("reaper: %w", ErrUnsupported)
}
