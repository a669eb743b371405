package cgroup

import (
	"os"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

// envChild selects a child-process mode of the test binary (see childMain).
const envChild = "PSIFLOW_CGROUP_TEST_CHILD"

func TestMain(m *testing.M) {
	RunHelper()
	if mode := os.Getenv(envChild); mode != "" {
		os.Exit(childMain(mode))
	}
	// Groups left by an earlier run of these tests that was killed (timeout, SIGKILL).
	if tree, err := DefaultTree(); err == nil && os.Geteuid() == 0 {
		_, _ = tree.RemoveStale("test-")
	}
	goleak.VerifyTestMain(m)
}

func itoa(i int) string { return strconv.Itoa(i) }
