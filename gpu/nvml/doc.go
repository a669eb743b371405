// Package nvml is psiflow's only door to NVIDIA's management library
// (through github.com/NVIDIA/go-nvml): GPU utilisation, memory and PCIe
// throughput for metrics, the doctor and `psiflow cgroup run -follow-gpu`.
//
// # The guard
//
// Any NVML call after a failed nvmlInit kills the process (go-nvml resolves
// the library's symbols lazily; without the library the process exits with
// status 127). So NVML is reached only through a [Monitor], and [Open]
// returns one only when Init succeeded: a failed Init is an error (wrapping
// gpu.ErrNoDriver when libnvidia-ml.so.1 is absent) and no other NVML
// function is called, not even nvmlErrorString or nvmlShutdown. A test fails
// if any other package of psiflow imports go-nvml.
//
// go-nvml needs cgo: a build with CGO_ENABLED=0 has no NVML, and [Open] says
// so (gpu.ErrNoDriver).
//
// # What it owns
//
// The monitor ([Open], [Monitor.Sample]), its Prometheus collector
// ([Monitor.Collector]: psiflow_gpu_utilization_ratio,
// psiflow_gpu_memory_utilization_ratio, psiflow_gpu_memory_bytes,
// psiflow_gpu_pcie_bytes_per_second, psiflow_gpu_nvml_errors_total), and
// [Follow], which sets a cgroup's CPU quota from GPU utilisation. It does not
// own device memory or copies (gpu/cuda) or cgroup control (package cgroup).
package nvml
