//go:build !linux

package sink

import "testing"

// smallTmpfs skips: the test mounts its small tmpfs on Linux only.
func smallTmpfs(t *testing.T) string {
	t.Helper()
	t.Skip("mounting a tmpfs needs Linux")
	return ""
}
