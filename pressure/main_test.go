package pressure

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/psiflow/psiflow/cgroup"
)

// helperEnv selects a helper mode when the test binary is re-executed as a child that
// makes memory pressure (see realpressure_linux_test.go).
const testHelperEnv = "PSIFLOW_PRESSURE_TEST_HELPER"

func TestMain(m *testing.M) {
	// The re-exec entry points, as reexec.Init calls them (this package cannot import
	// reexec): the user-namespace helper and cgroup's blocked start and watchdog.
	cgroup.RunHelper()
	RunHelper()
	if mode := os.Getenv(testHelperEnv); mode != "" {
		if err := runTestHelper(mode); err != nil {
			fmt.Fprintf(os.Stderr, "pressure test helper %s: %v\n", mode, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
