//go:build !linux

package cuda

import (
	"fmt"
	"runtime"

	"github.com/psiflow/psiflow/gpu"
)

// Device is a CUDA device; on this platform none can be opened.
type Device struct{ gpu.Device }

// Open reports that psiflow loads the CUDA driver on Linux only.
func Open(cfg Config) (*Device, error) {
	return nil, fmt.Errorf("%w: cuda: psiflow loads the CUDA driver API on Linux only (this is %s)", gpu.ErrNoDriver, runtime.GOOS)
}
