package pipelines

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/psiflow/psiflow/reexec"
)

// afterTests run once every test has: the Linux device kinds' tests add the
// removal of the fake CUDA drivers they built (kinds_device_linux_test.go).
var afterTests []func()

func TestMain(m *testing.M) {
	reexec.Init()
	code := m.Run()
	for _, f := range afterTests {
		f()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
