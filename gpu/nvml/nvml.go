package nvml

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/psiflow/psiflow/gpu"
)

// Sample is one device's state as NVML reports it.
type Sample struct {
	// Index is the NVML device index; Name its model.
	Index int
	Name  string
	// GPU is the fraction of the last sample period in which a kernel ran;
	// Memory the fraction in which device memory was read or written.
	GPU, Memory float64
	// MemoryUsed and MemoryTotal are bytes of device memory.
	MemoryUsed, MemoryTotal int64
	// PCIeTx and PCIeRx are bytes per second over the PCIe link, from the
	// device (TX) and to it (RX), averaged by NVML over 20 ms.
	PCIeTx, PCIeRx float64
}

// library is the part of NVML a Monitor calls, behind the guard. The cgo
// build implements it with go-nvml; tests with a stub.
type library interface {
	count() (int, error)
	sample(i int) (Sample, error)
	shutdown() error
}

// Monitor samples the devices NVML sees. It exists only after a successful
// nvmlInit (see the package doc). It is safe for concurrent use.
type Monitor struct {
	mu     sync.Mutex
	lib    library // nil once closed
	n      int
	errors prometheus.Counter
}

func newMonitor(lib library) (*Monitor, error) {
	n, err := lib.count()
	if err != nil {
		_ = lib.shutdown()
		return nil, err
	}
	return &Monitor{lib: lib, n: n, errors: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "psiflow_gpu_nvml_errors_total", Help: "NVML queries that failed while collecting GPU metrics.",
	})}, nil
}

// Devices is the number of devices.
func (m *Monitor) Devices() int { return m.n }

// Sample reads device i.
func (m *Monitor) Sample(i int) (Sample, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lib == nil {
		return Sample{}, fmt.Errorf("nvml: sample device %d: %w", i, gpu.ErrClosed)
	}
	if i < 0 || i >= m.n {
		return Sample{}, fmt.Errorf("nvml: device %d of %d: %w", i, m.n, gpu.ErrNoDevice)
	}
	return m.lib.sample(i)
}

// Utilization is the mean GPU utilisation (0..1) over all devices.
func (m *Monitor) Utilization() (float64, error) {
	if m.n == 0 {
		return 0, fmt.Errorf("nvml: utilisation: %w (NVML sees no device)", gpu.ErrNoDevice)
	}
	var sum float64
	for i := range m.n {
		s, err := m.Sample(i)
		if err != nil {
			return 0, err
		}
		sum += s.GPU
	}
	return sum / float64(m.n), nil
}

// Close shuts NVML down; the monitor then refuses every call.
func (m *Monitor) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lib == nil {
		return nil
	}
	err := m.lib.shutdown()
	m.lib = nil
	return err
}

// Collector exports every device's sample at each scrape.
func (m *Monitor) Collector() prometheus.Collector { return collector{m} }

var (
	descUtil = prometheus.NewDesc("psiflow_gpu_utilization_ratio",
		"Fraction of the last NVML sample period in which a kernel ran on the GPU.", []string{"device", "name"}, nil)
	descMemUtil = prometheus.NewDesc("psiflow_gpu_memory_utilization_ratio",
		"Fraction of the last NVML sample period in which device memory was read or written.", []string{"device", "name"}, nil)
	descMem = prometheus.NewDesc("psiflow_gpu_memory_bytes",
		"Device memory: state=used or total.", []string{"device", "name", "state"}, nil)
	descPCIe = prometheus.NewDesc("psiflow_gpu_pcie_bytes_per_second",
		"PCIe throughput: direction=rx (host to device) or tx (device to host).", []string{"device", "name", "direction"}, nil)
)

type collector struct{ m *Monitor }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUtil, descMemUtil, descMem, descPCIe} {
		ch <- d
	}
	c.m.errors.Describe(ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for i := range c.m.n {
		s, err := c.m.Sample(i)
		if err != nil {
			c.m.errors.Inc()
			continue
		}
		dev, g := fmt.Sprint(i), prometheus.GaugeValue
		ch <- prometheus.MustNewConstMetric(descUtil, g, s.GPU, dev, s.Name)
		ch <- prometheus.MustNewConstMetric(descMemUtil, g, s.Memory, dev, s.Name)
		ch <- prometheus.MustNewConstMetric(descMem, g, float64(s.MemoryUsed), dev, s.Name, "used")
		ch <- prometheus.MustNewConstMetric(descMem, g, float64(s.MemoryTotal), dev, s.Name, "total")
		ch <- prometheus.MustNewConstMetric(descPCIe, g, s.PCIeRx, dev, s.Name, "rx")
		ch <- prometheus.MustNewConstMetric(descPCIe, g, s.PCIeTx, dev, s.Name, "tx")
	}
	c.m.errors.Collect(ch)
}

// ErrNoCgo is what [Open] wraps in a build without cgo.
var ErrNoCgo = errors.New("nvml: this psiflow was built without cgo (CGO_ENABLED=0), and go-nvml needs cgo to load libnvidia-ml")
