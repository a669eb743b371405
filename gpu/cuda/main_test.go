// TestMain removes the fake CUDA driver's builds (internal/fakecuda), which the
// tests, all Linux's like the binding they test, make.

//go:build linux

package cuda_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/psiflow/psiflow/internal/fakecuda"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	fakecuda.Cleanup()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
