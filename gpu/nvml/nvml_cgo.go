//go:build linux && cgo

package nvml

import (
	"fmt"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/psiflow/psiflow/gpu"
)

// Open initialises NVML and returns a monitor of its devices. A failed Init
// is an error that says why (without calling NVML again: see the package doc);
// a missing libnvidia-ml.so.1 wraps gpu.ErrNoDriver.
func Open() (*Monitor, error) { return open(gonvml.New()) }

func open(lib gonvml.Interface) (*Monitor, error) {
	if ret := lib.Init(); ret != gonvml.SUCCESS {
		return nil, initError(ret) // nothing else may be called now
	}
	return newMonitor(&goNVML{lib: lib})
}

// initError explains a failed nvmlInit without calling into NVML
// (nvmlErrorString is itself an NVML call).
func initError(ret gonvml.Return) error {
	switch ret {
	case gonvml.ERROR_LIBRARY_NOT_FOUND:
		return fmt.Errorf("%w: nvml: libnvidia-ml.so.1 not found (no NVIDIA driver on this host); GPU monitoring off", gpu.ErrNoDriver)
	case gonvml.ERROR_DRIVER_NOT_LOADED:
		return fmt.Errorf("%w: nvml: the NVIDIA kernel driver is not loaded", gpu.ErrNoDriver)
	case gonvml.ERROR_NO_PERMISSION:
		return fmt.Errorf("nvml: no permission to open the NVIDIA device nodes (nvmlInit code %d)", int32(ret))
	case gonvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return fmt.Errorf("%w: nvml: libnvidia-ml and the kernel driver versions differ (reboot or reinstall the driver)", gpu.ErrNoDriver)
	}
	return fmt.Errorf("nvml: nvmlInit failed with NVML code %d", int32(ret))
}

// goNVML is the guarded library: it exists only after a successful Init.
type goNVML struct {
	lib     gonvml.Interface
	devices []gonvml.Device
	names   []string
}

func (g *goNVML) fail(what string, ret gonvml.Return) error {
	return fmt.Errorf("nvml: %s: %s (NVML code %d)", what, g.lib.ErrorString(ret), int32(ret))
}

func (g *goNVML) count() (int, error) {
	n, ret := g.lib.DeviceGetCount()
	if ret != gonvml.SUCCESS {
		return 0, g.fail("nvmlDeviceGetCount", ret)
	}
	for i := range n {
		d, ret := g.lib.DeviceGetHandleByIndex(i)
		if ret != gonvml.SUCCESS {
			return 0, g.fail(fmt.Sprintf("nvmlDeviceGetHandleByIndex(%d)", i), ret)
		}
		name, ret := d.GetName()
		if ret != gonvml.SUCCESS {
			name = "unknown"
		}
		g.devices = append(g.devices, d)
		g.names = append(g.names, name)
	}
	return n, nil
}

func (g *goNVML) sample(i int) (Sample, error) {
	d := g.devices[i]
	s := Sample{Index: i, Name: g.names[i]}
	u, ret := d.GetUtilizationRates()
	if ret != gonvml.SUCCESS {
		return s, g.fail(fmt.Sprintf("device %d utilisation", i), ret)
	}
	s.GPU, s.Memory = float64(u.Gpu)/100, float64(u.Memory)/100
	m, ret := d.GetMemoryInfo()
	if ret != gonvml.SUCCESS {
		return s, g.fail(fmt.Sprintf("device %d memory", i), ret)
	}
	s.MemoryUsed, s.MemoryTotal = int64(m.Used), int64(m.Total)
	tx, ret := d.GetPcieThroughput(gonvml.PCIE_UTIL_TX_BYTES)
	if ret != gonvml.SUCCESS {
		return s, g.fail(fmt.Sprintf("device %d PCIe TX", i), ret)
	}
	rx, ret := d.GetPcieThroughput(gonvml.PCIE_UTIL_RX_BYTES)
	if ret != gonvml.SUCCESS {
		return s, g.fail(fmt.Sprintf("device %d PCIe RX", i), ret)
	}
	s.PCIeTx, s.PCIeRx = float64(tx)*1024, float64(rx)*1024 // NVML reports KB/s
	return s, nil
}

func (g *goNVML) shutdown() error {
	if ret := g.lib.Shutdown(); ret != gonvml.SUCCESS {
		return g.fail("nvmlShutdown", ret)
	}
	return nil
}
