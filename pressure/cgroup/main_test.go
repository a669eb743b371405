package cgroup

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// envChild selects a child-process mode of the test binary (see childMain).
const envChild = "PSIFLOW_CGROUP_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(envChild); mode != "" {
		os.Exit(childMain(mode))
	}
	goleak.VerifyTestMain(m)
}
