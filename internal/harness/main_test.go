package harness

import (
	"os"
	"testing"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/reexec"
	"go.uber.org/goleak"
)

// envChild selects a fake-loader mode of the test binary (see childMain).
const envChild = "PSIFLOW_HARNESS_TEST_CHILD"

// testPrefix starts the names of the groups these tests create.
const testPrefix = "bench-test"

func TestMain(m *testing.M) {
	reexec.Init()
	if mode := os.Getenv(envChild); mode != "" {
		os.Exit(childMain(mode))
	}
	// Groups left by an earlier run of these tests that was killed.
	if tree, err := cgroup.DefaultTree(); err == nil && os.Geteuid() == 0 {
		_, _ = tree.RemoveStale(testPrefix)
	}
	goleak.VerifyTestMain(m)
}
