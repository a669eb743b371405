//go:build linux

package cgroup

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// DeviceOf returns the major and minor numbers of the block device holding path (for
// [IOLimit]). For a partition that is the partition's device; cgroup IO throttling
// accepts only whole disks, so pass the disk's numbers (from /sys/dev/block/MAJ:MIN/..)
// when path lives on a partition.
func DeviceOf(path string) (major, minor uint32, err error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, 0, fmt.Errorf("device of %s: %w", path, err)
	}
	return unix.Major(st.Dev), unix.Minor(st.Dev), nil
}
