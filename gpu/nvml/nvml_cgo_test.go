//go:build linux && cgo

package nvml

import (
	"errors"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/psiflow/psiflow/gpu"
)

// TestFailedInitCallsNothingElse: the mock has only Init; any other call
// would panic (moq's "called but was nil"), as the real library would kill
// the process.
func TestFailedInitCallsNothingElse(t *testing.T) {
	for _, tc := range []struct {
		ret    gonvml.Return
		driver bool
		want   string
	}{
		{gonvml.ERROR_LIBRARY_NOT_FOUND, true, "libnvidia-ml.so.1 not found"},
		{gonvml.ERROR_DRIVER_NOT_LOADED, true, "kernel driver is not loaded"},
		{gonvml.ERROR_NO_PERMISSION, false, "no permission"},
		{gonvml.ERROR_UNKNOWN, false, "NVML code 999"},
	} {
		lib := &mock.Interface{InitFunc: func() gonvml.Return { return tc.ret }}
		m, err := open(lib)
		if m != nil || err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, gpu.ErrNoDriver) != tc.driver {
			t.Errorf("open with Init = %d: %v, %v; want %q (ErrNoDriver %v)", tc.ret, m, err, tc.want, tc.driver)
		}
		if n := len(lib.InitCalls()); n != 1 {
			t.Errorf("Init called %d times", n)
		}
	}
}

// TestOpenOnThisHost calls the real library loader: on a host without the
// driver Open must fail cleanly, and the test process must live on.
func TestOpenOnThisHost(t *testing.T) {
	m, err := Open()
	if err != nil {
		if !errors.Is(err, gpu.ErrNoDriver) && !strings.Contains(err.Error(), "nvml") {
			t.Fatalf("Open = %v", err)
		}
		t.Logf("no NVML here, as expected on a machine without a GPU: %v", err)
		return
	}
	defer m.Close()
	t.Logf("NVML sees %d device(s)", m.Devices())
}

func twoDevices() *mock.Interface {
	dev := func(util, mem uint32, used uint64, tx, rx uint32, name string) *mock.Device {
		return &mock.Device{
			GetNameFunc: func() (string, gonvml.Return) { return name, gonvml.SUCCESS },
			GetUtilizationRatesFunc: func() (gonvml.Utilization, gonvml.Return) {
				return gonvml.Utilization{Gpu: util, Memory: mem}, gonvml.SUCCESS
			},
			GetMemoryInfoFunc: func() (gonvml.Memory, gonvml.Return) {
				return gonvml.Memory{Total: 80 << 30, Used: used, Free: 80<<30 - used}, gonvml.SUCCESS
			},
			GetPcieThroughputFunc: func(c gonvml.PcieUtilCounter) (uint32, gonvml.Return) {
				if c == gonvml.PCIE_UTIL_TX_BYTES {
					return tx, gonvml.SUCCESS
				}
				return rx, gonvml.SUCCESS
			},
		}
	}
	devs := []gonvml.Device{dev(90, 40, 10<<30, 100, 2_000_000, "H200"), dev(30, 10, 1<<30, 0, 0, "H200")}
	return &mock.Interface{
		InitFunc:           func() gonvml.Return { return gonvml.SUCCESS },
		ShutdownFunc:       func() gonvml.Return { return gonvml.SUCCESS },
		DeviceGetCountFunc: func() (int, gonvml.Return) { return len(devs), gonvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (gonvml.Device, gonvml.Return) {
			return devs[i], gonvml.SUCCESS
		},
		ErrorStringFunc: func(r gonvml.Return) string { return "mock error" },
	}
}

func TestMonitor(t *testing.T) {
	lib := twoDevices()
	m, err := open(lib)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Sample(0)
	if err != nil {
		t.Fatal(err)
	}
	want := Sample{Index: 0, Name: "H200", GPU: 0.9, Memory: 0.4, MemoryUsed: 10 << 30, MemoryTotal: 80 << 30, PCIeTx: 100 * 1024, PCIeRx: 2_000_000 * 1024}
	if s != want {
		t.Errorf("Sample(0) = %+v, want %+v", s, want)
	}
	if u, err := m.Utilization(); err != nil || u != 0.6 {
		t.Errorf("Utilization = %v, %v; want the mean 0.6", u, err)
	}
	if _, err := m.Sample(2); !errors.Is(err, gpu.ErrNoDevice) {
		t.Errorf("Sample(2) = %v", err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m.Collector()); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP psiflow_gpu_pcie_bytes_per_second PCIe throughput: direction=rx (host to device) or tx (device to host).
# TYPE psiflow_gpu_pcie_bytes_per_second gauge
psiflow_gpu_pcie_bytes_per_second{device="0",direction="rx",name="H200"} 2.048e+09
psiflow_gpu_pcie_bytes_per_second{device="0",direction="tx",name="H200"} 102400
psiflow_gpu_pcie_bytes_per_second{device="1",direction="rx",name="H200"} 0
psiflow_gpu_pcie_bytes_per_second{device="1",direction="tx",name="H200"} 0
# HELP psiflow_gpu_utilization_ratio Fraction of the last NVML sample period in which a kernel ran on the GPU.
# TYPE psiflow_gpu_utilization_ratio gauge
psiflow_gpu_utilization_ratio{device="0",name="H200"} 0.9
psiflow_gpu_utilization_ratio{device="1",name="H200"} 0.3
`), "psiflow_gpu_utilization_ratio", "psiflow_gpu_pcie_bytes_per_second"); err != nil {
		t.Error(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil || len(lib.ShutdownCalls()) != 1 {
		t.Errorf("second Close = %v, Shutdown called %d times", err, len(lib.ShutdownCalls()))
	}
	if _, err := m.Sample(0); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("Sample after Close = %v", err)
	}
}

func TestQueryErrorsAreNamed(t *testing.T) {
	lib := twoDevices()
	lib.DeviceGetCountFunc = func() (int, gonvml.Return) { return 0, gonvml.ERROR_GPU_IS_LOST }
	if _, err := open(lib); err == nil || !strings.Contains(err.Error(), "nvmlDeviceGetCount: mock error") {
		t.Fatalf("open = %v", err)
	}
	if len(lib.ShutdownCalls()) != 1 {
		t.Error("a monitor that failed after Init did not shut NVML down")
	}
}
