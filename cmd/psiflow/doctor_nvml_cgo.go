//go:build linux && cgo

package main

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// probeNVML initialises NVML and, only if that succeeded, counts the devices and shuts
// NVML down again. Nothing else is called after a failed Init: go-nvml's other calls
// crash the process when the library was not loaded.
func probeNVML(ctx context.Context) (bool, string) {
	ret := nvml.Init()
	if ret != nvml.SUCCESS {
		return false, nvmlReason(ret)
	}
	defer nvml.Shutdown()
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return false, fmt.Sprintf("NVML initialised but nvmlDeviceGetCount failed (code %d)", int32(ret))
	}
	drv, ret := nvml.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		drv = "unknown"
	}
	return n > 0, fmt.Sprintf("%d device(s), driver %s", n, drv)
}

// nvmlReason explains a failed nvmlInit without calling into NVML (nvmlErrorString
// is itself an NVML call).
func nvmlReason(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "libnvidia-ml.so.1 not found (no NVIDIA driver on this host); GPU monitoring off"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "NVIDIA kernel driver not loaded"
	case nvml.ERROR_NO_PERMISSION:
		return "no permission to open the NVIDIA device nodes"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "libnvidia-ml and the kernel driver versions differ (reboot or reinstall the driver)"
	}
	return fmt.Sprintf("nvmlInit failed with NVML code %d", int32(ret))
}
