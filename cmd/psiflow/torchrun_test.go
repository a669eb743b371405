package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pythonWithTorch returns Debian's python3 when it imports torch (python3-torch,
// which make test installs); without it the test is skipped, unless
// PSIFLOW_REQUIRE_PYTHON=1, where it fails.
func pythonWithTorch(t *testing.T) string {
	t.Helper()
	py := pythonWithNumpy(t)
	if out, err := exec.Command(py, "-c", "import torch.distributed.run").CombinedOutput(); err != nil {
		if os.Getenv("PSIFLOW_REQUIRE_PYTHON") == "1" {
			t.Fatalf("%s cannot import torch (install python3-torch): %v\n%s", py, err, out)
		}
		t.Skipf("%s cannot import torch (install python3-torch): %v", py, err)
	}
	return py
}

// TestTorchrun launches two ranks with torch.distributed.run (Debian's torch
// 1.13, gloo on CPU; --redirects 1 --tee 1 because its defaults break on
// Python 3.11), each with a psiflow.DataLoader taking its rank from
// torch.distributed: every file exactly once per epoch across ranks, a new order
// every epoch, and rank 1 SIGKILLed mid-epoch, restarted by torchrun from its
// last state_dict, completing the epoch exactly once (python/tests/torchrun_worker.py
// checks all of it and prints TORCHRUN-OK).
func TestTorchrun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts torchrun")
	}
	py := pythonWithTorch(t)
	dir := t.TempDir()
	wrapper := psiflowWrapper(t, dir)
	data := filepath.Join(dir, "data")
	for _, class := range []string{"cat", "dog"} {
		var out bytes.Buffer
		if code := dispatch(context.Background(), &out, &out, []string{"gen", "jpeg", "-out", filepath.Join(data, class), "-n", "10", "-width", "64", "-height", "48"}); code != 0 {
			t.Fatalf("gen: exit %d: %s", code, out.String())
		}
	}
	ckpt := filepath.Join(dir, "ckpt")
	if err := os.Mkdir(ckpt, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
		"--nproc_per_node", "2", "--max_restarts", "1", "--redirects", "1", "--tee", "1",
		"python/tests/torchrun_worker.py", data, ckpt)
	cmd.Dir = "../.."
	cmd.Env = append(withoutEnv("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"),
		"PSIFLOW_BIN="+wrapper, "PYTHONDONTWRITEBYTECODE=1", "OMP_NUM_THREADS=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "TORCHRUN-OK") {
		t.Fatalf("torchrun: %v\n%s", err, out)
	}
	for _, want := range []string{"rank 1: killing itself", "rank 1: resumed at epoch 2, offset 12"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("torchrun output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("%s", out)
}

// psiflowWrapper writes a psiflow program into dir that runs this test binary
// as the launcher (TestServeHelperProcess), so the Python side needs no build.
func psiflowWrapper(t *testing.T, dir string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(dir, "psiflow")
	script := fmt.Sprintf("#!/bin/sh\nPSIFLOW_SERVE_HELPER=1 exec '%s' -test.run='^TestServeHelperProcess$' -- \"$@\"\n", exe)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper
}
