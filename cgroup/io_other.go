//go:build !linux

package cgroup

import "fmt"

// DeviceOf returns the major and minor numbers of the block device holding path. It
// fails with [ErrUnsupported] outside Linux.
func DeviceOf(path string) (major, minor uint32, err error) {
	return 0, 0, fmt.Errorf("device of %s: %w", path, ErrUnsupported)
}
