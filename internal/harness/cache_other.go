//go:build !linux

package harness

import (
	"fmt"

	"github.com/psiflow/psiflow/cgroup"
)

// DropCache drops the page cache of each file. It is Linux-only and fails elsewhere.
func DropCache(paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	return fmt.Errorf("harness: drop cache of %s: %w", paths[0], cgroup.ErrUnsupported)
}

// CachedBytes returns how many bytes of the files are in the page cache and their total
// size. It is Linux-only and fails elsewhere.
func CachedBytes(paths []string) (cached, total int64, err error) {
	return 0, 0, fmt.Errorf("harness: cached bytes: %w", cgroup.ErrUnsupported)
}
