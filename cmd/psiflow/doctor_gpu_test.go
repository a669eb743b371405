//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/psiflow/psiflow/gpu/cuda"
	"github.com/psiflow/psiflow/internal/fakecuda"
)

// TestDoctorGPURows: without a driver the CUDA row says gpu.ErrNoDriver plainly;
// pointed at the fake driver it finds the device.
func TestDoctorGPURows(t *testing.T) {
	t.Setenv(cuda.EnvLibrary, "/nonexistent/libcuda.so.1")
	rows, _ := doctorRows(t)
	if r := rows["CUDA driver"]; r[0] != "no" || !strings.Contains(r[1], "gpu: no driver") || !strings.Contains(r[1], "/nonexistent/libcuda.so.1") ||
		!strings.Contains(r[1], "resources.device auto or cuda (device: sim simulates one)") {
		t.Errorf("CUDA driver row without a driver = %v, want no with the ErrNoDriver text and what pipelines do", r)
	}
	if r := rows["NVML"]; r[0] == "no" && r[1] == "" {
		t.Errorf("NVML row %v: no without a reason", r)
	}

	path := fakecuda.Build(t, fakecuda.Full)
	t.Cleanup(fakecuda.Cleanup) // the library stays mapped; its file goes
	t.Setenv(cuda.EnvLibrary, path)
	rows, _ = doctorRows(t)
	if r := rows["CUDA driver"]; r[0] != "yes" || !strings.Contains(r[1], "cuda:0 psiflow fake CUDA device 0 (driver 13.0), 1 GiB free of 1 GiB") {
		t.Errorf("CUDA driver row with the fake driver = %v", r)
	}
	fakecuda.Open(t, path).CheckNoViolations(t)
}
