package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/psiflow/psiflow/gpu"
	"github.com/psiflow/psiflow/gpu/cuda"
	"github.com/psiflow/psiflow/gpu/nvml"
	"github.com/psiflow/psiflow/internal/bytesize"
)

func init() {
	registerCheck(hostCheck{601, "CUDA driver", probeCUDA})
}

// probeNVML opens NVML through its guard (package gpu/nvml: nothing else is called
// after a failed Init) and lists the devices.
func probeNVML(ctx context.Context) (bool, string) {
	m, err := nvml.Open()
	if err != nil {
		return false, err.Error()
	}
	defer m.Close()
	var names []string
	for i := range m.Devices() {
		s, err := m.Sample(i)
		if err != nil {
			return false, err.Error()
		}
		names = append(names, fmt.Sprintf("%d: %s, %.0f%% busy, %s of %s used", i, s.Name, 100*s.GPU, bytesize.Human(s.MemoryUsed), bytesize.Human(s.MemoryTotal)))
	}
	if len(names) == 0 {
		return false, "NVML initialised but sees no device"
	}
	return true, fmt.Sprintf("%d device(s): %s", len(names), strings.Join(names, "; "))
}

// probeCUDA opens device 0 through the CUDA driver API (gpu/cuda; the library from
// PSIFLOW_LIBCUDA, else libcuda.so.1) and reports its memory.
func probeCUDA(ctx context.Context) (bool, string) {
	d, err := cuda.Open(cuda.DefaultConfig(0))
	if err != nil {
		if errors.Is(err, gpu.ErrNoDriver) {
			return false, err.Error() + "; pipelines with pin/h2d stages fail under resources.device auto or cuda (device: sim simulates one)"
		}
		return false, err.Error()
	}
	defer d.Close()
	mi, err := d.MemInfo()
	if err != nil {
		return false, err.Error()
	}
	return true, fmt.Sprintf("%s, %s free of %s (%s)", d.Name(), bytesize.Human(mi.Free), bytesize.Human(mi.Total), cudaLibrary(d))
}
