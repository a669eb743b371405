package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/psiflow/psiflow/gpu"
	"github.com/psiflow/psiflow/gpu/nvml"
)

// TestCgroupRunFollowGPU: -follow-gpu needs its bounds, and without NVML it stops
// before anything runs, saying why (no silent fallback to the throttling controller).
func TestCgroupRunFollowGPU(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := dispatch(context.Background(), &out, &errOut, []string{"cgroup", "run", "-follow-gpu", "--", "/bin/true"}); code != 2 || !strings.Contains(errOut.String(), "-follow-gpu needs -adaptive-cpus MIN:MAX") {
		t.Fatalf("-follow-gpu alone: exit %d, %s", code, errOut.String())
	}
	m, err := nvml.Open()
	if err == nil {
		m.Close()
		t.Skip("NVML works on this host: the no-driver path cannot be seen here")
	}
	if !errors.Is(err, gpu.ErrNoDriver) {
		t.Fatalf("nvml.Open = %v", err)
	}
	out.Reset()
	errOut.Reset()
	code := dispatch(context.Background(), &out, &errOut, []string{"cgroup", "run", "-follow-gpu", "-adaptive-cpus", "0.5:2", "--", "/bin/sh", "-c", "echo ran"})
	if code != 1 || !strings.Contains(errOut.String(), "-follow-gpu: gpu: no driver") || strings.Contains(out.String(), "ran") {
		t.Fatalf("-follow-gpu without NVML: exit %d, stdout %q, stderr %q; want 1, the reason, and the command not run", code, out.String(), errOut.String())
	}
}
