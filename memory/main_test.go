package memory

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/psiflow/psiflow/reexec"
)

// helperEnv makes the test binary a helper process: its value names one of helpers.
const helperEnv = "PSIFLOW_ELASTIC_TEST_HELPER"

// helpers are the helper processes by mode; the tests that start them add them
// (process_linux_test.go: theirs need Linux).
var helpers = map[string]func() int{}

func TestMain(m *testing.M) {
	reexec.Init()
	if mode := os.Getenv(helperEnv); mode != "" {
		run, ok := helpers[mode]
		if !ok {
			fmt.Fprintf(os.Stderr, "memory test helper: no mode %q\n", mode)
			os.Exit(2)
		}
		os.Exit(run())
	}
	goleak.VerifyTestMain(m)
}
