package stuckfs

import (
	"testing"

	"github.com/psiflow/psiflow/internal/kerneltest"
)

// MountT mounts a file system with opts in a temporary folder of t, or skips
// t (kerneltest.FUSE) where this host cannot mount one. The mount is closed
// when t ends.
func MountT(t testing.TB, opts Options) *FS {
	t.Helper()
	f, err := Mount(t.TempDir(), opts)
	if err != nil {
		kerneltest.Skip(t, kerneltest.FUSE, "cannot mount a FUSE file system here: %v", err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("stuckfs: %v", err)
		}
	})
	return f
}
