package cuda

import (
	"fmt"
	"os"

	"github.com/psiflow/psiflow/gpu"
)

// EnvLibrary names the environment variable [DefaultConfig] reads: the driver
// library to load, a file name searched by the dynamic loader or a path. It is
// the only environment psiflow's CUDA binding reads, and only there.
const EnvLibrary = "PSIFLOW_LIBCUDA"

// DefaultLibrary is the driver library loaded when none is named.
const DefaultLibrary = "libcuda.so.1"

// Config says which driver library and which device [Open] uses.
type Config struct {
	// Library is the driver library: a file name searched by the dynamic
	// loader or a path. Empty means [DefaultLibrary]. Tests point it at the
	// fake driver.
	Library string
	// Ordinal is the device number (cuDeviceGet).
	Ordinal int
}

// Error is a failed driver call: the call, the CUresult and the driver's own
// name and description of it.
type Error struct {
	// Call is the driver entry point, e.g. "cuMemAlloc_v2".
	Call string
	// Code is the CUresult.
	Code int
	// Name and Text are cuGetErrorName and cuGetErrorString of Code (empty
	// when the driver does not know it).
	Name, Text string
}

// Error reads "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory".
func (e *Error) Error() string {
	name := e.Name
	if name == "" {
		name = "CUresult"
	}
	if e.Text == "" {
		return fmt.Sprintf("cuda: %s: %s (%d)", e.Call, name, e.Code)
	}
	return fmt.Sprintf("cuda: %s: %s (%d): %s", e.Call, name, e.Code, e.Text)
}

// The CUresult codes psiflow gives a meaning to.
const (
	codeOutOfMemory    = 2
	codeNotInitialized = 3
	codeDeinitialized  = 4
	codeNoDevice       = 100
	codeInvalidDevice  = 101
	codeInsufficient   = 35 // CUDA_ERROR_INSUFFICIENT_DRIVER
	codeNotReady       = 600
)

// Is maps driver codes onto the gpu package's errors: out of memory is
// gpu.ErrOutOfMemory; no device or an invalid ordinal is gpu.ErrNoDevice; a
// driver too old for the runtime, not initialised or shutting down is
// gpu.ErrNoDriver.
func (e *Error) Is(target error) bool {
	switch target {
	case gpu.ErrOutOfMemory:
		return e.Code == codeOutOfMemory
	case gpu.ErrNoDevice:
		return e.Code == codeNoDevice || e.Code == codeInvalidDevice
	case gpu.ErrNoDriver:
		return e.Code == codeInsufficient || e.Code == codeNotInitialized || e.Code == codeDeinitialized
	}
	return false
}

// DefaultConfig is Config{Library: $PSIFLOW_LIBCUDA} for device ordinal: the
// one place the binding reads the environment.
func DefaultConfig(ordinal int) Config {
	return Config{Library: os.Getenv(EnvLibrary), Ordinal: ordinal}
}
