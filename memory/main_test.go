package memory

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/psiflow/psiflow/reexec"
)

// helperEnv makes the test binary a helper process (process_linux_test.go).
const helperEnv = "PSIFLOW_ELASTIC_TEST_HELPER"

func TestMain(m *testing.M) {
	reexec.Init()
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	goleak.VerifyTestMain(m)
}

func runHelper(mode string) int {
	switch mode {
	case "oom":
		old, err := PreferOOMVictim()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		b, err := os.ReadFile("/proc/self/oom_score_adj")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("%d %s", old, b)
		return 0
	}
	return 2
}
