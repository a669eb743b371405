package pipelines

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/psiflow/psiflow/internal/fakecuda"
	"github.com/psiflow/psiflow/reexec"
)

func TestMain(m *testing.M) {
	reexec.Init()
	code := m.Run()
	fakecuda.Cleanup() // the fake CUDA drivers the device kinds' tests built
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
