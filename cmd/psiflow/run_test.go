package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/psiflow/psiflow/cgroup"
)

// envTestAsMain makes the test binary act as psiflow (for the -cgroup child and
// the signal test, which need a real process).
const envTestAsMain = "PSIFLOW_TEST_AS_MAIN"

const badPipeline = `source:
  kind: generate
  config: {items: 10, widht: 40}
stages:
  - kind: decode
  - kind: collate
sink: discard
`

func TestValidateCommand(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(badPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := dispatch(context.Background(), &out, &errOut, []string{"validate", "../../pipelines/demo.yaml", "imagefolder", "-set", "batch.size=8"}); code != 0 {
		t.Fatalf("shipped files: exit %d: %s%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"demo.yaml: valid: generate → decode → batch → collate → discard", "pipelines/imagefolder.yaml: valid: read(files)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	toDevice := filepath.Join(dir, "to-device.yaml")
	if err := os.WriteFile(toDevice, []byte("source: generate\nstages: [decode, batch, pin, h2d, mark_preemptible]\nsink: discard\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ set, want string }{
		{"resources.device=sim", "valid: generate → decode → batch → pin → h2d → mark_preemptible → discard, device sim (simulated)"},
		{"resources.device=auto", "valid: generate → decode → batch → pin → h2d → mark_preemptible → discard, device cuda"},
	} {
		out.Reset()
		if code := dispatch(context.Background(), &out, &errOut, []string{"validate", "-set", tc.set, toDevice}); code != 0 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("validate -set %s: exit %d, output %q, want %q", tc.set, code, out.String(), tc.want)
		}
	}
	out.Reset()
	errOut.Reset()
	code := dispatch(context.Background(), &out, &errOut, []string{"validate", bad})
	for _, want := range []string{
		bad + `:3:23: source of kind generate: unknown parameter "widht" (did you mean "width"?)`,
		"  3 |   config: {items: 10, widht: 40}",
		bad + `:6:11: stage "collate" (kind collate) reads images elements, but "decode" (kind decode) writes image; put a batch stage between them`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if code != 1 || !strings.Contains(errOut.String(), "1 of 1 files not valid") {
		t.Fatalf("bad file: exit %d, stderr %s", code, errOut.String())
	}
}

func TestStagesCommand(t *testing.T) {
	var out bytes.Buffer
	if code := dispatch(context.Background(), &out, &out, []string{"stages"}); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	for _, want := range []string{"files (→ sample)", "decode (sample → image)", "center_crop", "discard (any →)", "Resources (resources:)", "budget"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stages lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	code := dispatch(context.Background(), &out, &errOut, []string{"run", "demo", "-every", "0", "-metrics", "127.0.0.1:0",
		"-set", "source.items=50", "-set", "source.width=48", "-set", "source.height=40", "-set", "decode.resize=24", "-set", "decode.center_crop=16", "-set", "batch.size=10"})
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"psiflow run pipelines/demo.yaml: generate → decode", "and 64 MiB (loader floor", "metrics: http://127.0.0.1:", "50 samples in 5 batches", "STAGE", "collate", "Memory pressure while running:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// A file that fails validation starts nothing.
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(badPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	code = dispatch(context.Background(), &out, &errOut, []string{"run", bad})
	if code != 1 || strings.Contains(out.String(), "samples in") || !strings.Contains(errOut.String(), bad+":3:23") {
		t.Fatalf("bad file: exit %d\nstdout %s\nstderr %s", code, out.String(), errOut.String())
	}
}

// TestRunStopsGracefullyOnSIGTERM runs psiflow as a process, waits for its first
// progress line, sends SIGTERM and expects the summary table and exit status 143.
func TestRunStopsGracefullyOnSIGTERM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "run", "demo", "-every", "50ms", "-set", "source.items=1000000000",
		"-set", "source.width=32", "-set", "source.height=32", "-set", "decode.resize=16", "-set", "decode.center_crop=16")
	cmd.Env = append(os.Environ(), envTestAsMain+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var lines []string
	signalled := false
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if f := strings.Fields(sc.Text()); !signalled && len(f) > 2 && f[2] == "samples" && f[1] != "0" {
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			signalled = true
		}
	}
	err = cmd.Wait()
	all := strings.Join(lines, "\n")
	if !signalled {
		t.Fatalf("no progress line before exit (%v):\n%s\n%s", err, all, stderr.String())
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 143 {
		t.Fatalf("exit %v, want status 143 (128 + SIGTERM: stopped):\n%s", err, all)
	}
	for _, want := range []string{"stopped; what ran until then:", "STAGE", "decode", "Memory pressure while running:"} {
		if !strings.Contains(all, want) {
			t.Errorf("output lacks %q:\n%s", want, all)
		}
	}
	if !strings.Contains(stderr.String(), "psiflow run: stopped by SIGTERM") {
		t.Errorf("stderr %q lacks the reason", stderr.String())
	}
}

// TestRunInCgroup runs a pipeline with -cgroup: the child sees the file's memory
// limit (its auto budget is a quarter of it) and the group is gone afterwards.
func TestRunInCgroup(t *testing.T) {
	probe, err := cgroup.New("probe-" + strings.ReplaceAll(t.Name(), "/", "-"))
	if err != nil {
		t.Skipf("no cgroups here: %v", err)
	}
	if err := probe.SetMemoryMax(256 << 20); err != nil {
		_ = probe.Remove()
		t.Skipf("cannot set a memory limit here: %v", err)
	}
	if err := probe.Remove(); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envTestAsMain, "1")
	dir := t.TempDir()
	file := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(file, []byte(`source: {kind: generate, config: {items: 64, width: 32, height: 32}}
stages: [decode, batch, collate]
sink: discard
resources: {memory: 256MiB, pids: 64, cpus: 1.5, budget: auto, pressure: off}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := dispatch(context.Background(), &out, &errOut, []string{"run", "-cgroup", "-every", "0", file})
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"memory 256 MiB", "pids 64", "cpus 1.5", "budget: at most 64 MiB in flight, a quarter of the memory limit", "64 samples in", "ran "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	var name string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "psiflow run: in cgroup ") {
			name = strings.Fields(l)[3]
		}
	}
	tree, err := cgroup.DefaultTree()
	if err != nil || name == "" {
		t.Fatalf("group name %q, tree: %v", name, err)
	}
	for _, root := range []string{tree.V2Root(), tree.V1Root("memory"), tree.V1Root("pids")} {
		if root == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, name)); !os.IsNotExist(err) {
			t.Errorf("cgroup %s still exists under %s (%v)", name, root, err)
		}
	}
}
