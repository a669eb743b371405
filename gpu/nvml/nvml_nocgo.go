//go:build !linux || !cgo

package nvml

import (
	"fmt"

	"github.com/psiflow/psiflow/gpu"
)

// Open reports that this build has no NVML (go-nvml needs cgo, and Linux).
func Open() (*Monitor, error) {
	return nil, fmt.Errorf("%w: %w", gpu.ErrNoDriver, ErrNoCgo)
}
