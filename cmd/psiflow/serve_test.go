package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"
)

// TestServeHelperProcess is psiflow itself when PSIFLOW_SERVE_HELPER is set:
// the Python tests run this test binary as their psiflow program through a
// wrapper script, so they need no separate build.
func TestServeHelperProcess(t *testing.T) {
	if os.Getenv("PSIFLOW_SERVE_HELPER") != "1" {
		t.Skip("only run as the Python tests' psiflow")
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(dispatch(context.Background(), os.Stdout, os.Stderr, args))
}

// pythonWithNumpy returns Debian's python3 when it imports numpy. Without it the
// test is skipped, unless PSIFLOW_REQUIRE_PYTHON=1 (set by `make test`, which
// installs python3-numpy), where it fails.
func pythonWithNumpy(t *testing.T) string {
	t.Helper()
	py := "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import numpy").CombinedOutput(); err != nil {
		if os.Getenv("PSIFLOW_REQUIRE_PYTHON") == "1" {
			t.Fatalf("%s cannot import numpy (install python3-numpy): %v\n%s", py, err, out)
		}
		t.Skipf("%s cannot import numpy (install python3-numpy): %v", py, err)
	}
	return py
}

// TestPythonModule runs python/tests (unittest) against this package's psiflow:
// every batch once with its bytes, zero copy, explicit release, Python stopping
// early, Python killed with SIGKILL, Go failing or killed, and a real folder.
func TestPythonModule(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Python processes")
	}
	py := pythonWithNumpy(t)
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(dir, "psiflow")
	script := "#!/bin/sh\nPSIFLOW_SERVE_HELPER=1 exec '" + exe + "' -test.run='^TestServeHelperProcess$' -- \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	for _, class := range []string{"cat", "dog"} {
		var out bytes.Buffer
		if code := dispatch(context.Background(), &out, &out, []string{"gen", "jpeg", "-out", filepath.Join(data, class), "-n", "10", "-width", "64", "-height", "48"}); code != 0 {
			t.Fatalf("gen: exit %d: %s", code, out.String())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "discover", "-v", "-s", "python/tests", "-t", "python")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "PSIFLOW_BIN="+wrapper, "PSIFLOW_TEST_DATA="+data, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python tests: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "OK") || strings.Contains(string(out), "skipped 'PSIFLOW_TEST_DATA") {
		t.Fatalf("python tests did not all run:\n%s", out)
	}
	t.Logf("%s", out)
}

func TestServeUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve"}, "-socket is required"},
		{[]string{"serve", "-socket", "/tmp/x.sock"}, "exactly one of -data DIR and -synthetic N"},
		{[]string{"serve", "-socket", "/tmp/x.sock", "-synthetic", "1", "-shape", "4,x"}, "-shape"},
		{[]string{"serve", "-socket", "/tmp/x.sock", "-data", "/nonexistent", "-budget", "lots"}, "flag -budget"},
		{[]string{"serve", "-socket", "/tmp/x.sock", "-data", "/nonexistent", "-slots", "-1"}, "flag -slots"},
	} {
		var out bytes.Buffer
		if code := dispatch(context.Background(), &out, &out, tc.args); code != 2 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: exit %d, output %q, want 2 and %q", tc.args, code, out.String(), tc.want)
		}
	}
}

// demo -data -sink parquet:DIR writes every sample of the folder.
func TestDemoSinkParquet(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if code := dispatch(context.Background(), &out, &out, []string{"gen", "jpeg", "-out", filepath.Join(dir, "img", "c0"), "-n", "12", "-width", "64", "-height", "48"}); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, out.String())
	}
	out.Reset()
	pq := filepath.Join(dir, "pq")
	if code := dispatch(context.Background(), &out, &out, []string{"demo", "-data", filepath.Join(dir, "img"), "-batch", "5", "-pressure=false", "-sink", "parquet:" + pq}); code != 0 {
		t.Fatalf("demo: exit %d: %s", code, out.String())
	}
	files, err := filepath.Glob(filepath.Join(pq, "*.parquet"))
	if err != nil || len(files) != 1 {
		t.Fatalf("parquet files %v (%v), want 1", files, err)
	}
	rows := 0
	f, err := file.OpenParquetFile(files[0], false)
	if err != nil {
		t.Fatal(err)
	}
	rows = int(f.NumRows())
	f.Close()
	if rows != 12 {
		t.Fatalf("%d rows, want 12", rows)
	}
	out.Reset()
	if code := dispatch(context.Background(), &out, &out, []string{"demo", "-sink", "null"}); code != 2 || !strings.Contains(out.String(), "-sink needs -data") {
		t.Errorf("-sink without -data: exit %d: %s", code, out.String())
	}
	out.Reset()
	if code := dispatch(context.Background(), &out, &out, []string{"demo", "-data", dir, "-sink", "bogus:x"}); code != 2 || !strings.Contains(out.String(), "unknown kind") {
		t.Errorf("-sink bogus: exit %d: %s", code, out.String())
	}
}
