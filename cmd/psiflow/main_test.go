package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psiflow/psiflow/flow"
)

func TestDispatch(t *testing.T) {
	tests := []struct {
		args        []string
		code        int
		out, errOut string
	}{
		{[]string{"help"}, 0, "demo", ""},
		{[]string{"nope"}, 2, "", `unknown command "nope"`},
		{[]string{"demo", "-items", "200", "-size", "1024", "-budget", "1048576"}, 0, "200 samples in", ""},
		{[]string{"demo", "-items", "0"}, 2, "", "flag -items"},
		{[]string{"demo", "-bogus"}, 2, "", "flag provided but not defined"},
		{[]string{"demo", "extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"demo", "-on-error", "ignore"}, 2, "", `flag -on-error: on_error: "ignore" is not one of "stop", "skip"`},
		{[]string{"demo", "-max-skips", "3"}, 2, "", "-max-skips needs -data"},
		{[]string{"demo", "-data", "d", "-max-skips", "3"}, 2, "", "max_skips and max_skip_rate need on_error: skip"},
		{[]string{"demo", "-on-error", "skip", "-max-skips", "-1"}, 2, "", "flag -max-skips"},
		{[]string{"demo", "-data", "d", "-max-pixels", "0"}, 2, "", "max_pixels 0"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := dispatch(context.Background(), &out, &errOut, tc.args)
			if code != tc.code || !strings.Contains(out.String(), tc.out) || !strings.Contains(errOut.String()+out.String(), tc.errOut) {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
			}
		})
	}
}

func TestDemoSummaryTable(t *testing.T) {
	var out bytes.Buffer
	if code := dispatch(context.Background(), &out, &out, []string{"demo", "-items", "300", "-size", "2048", "-batch", "10", "-budget", "1000000"}); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	// 30 batches of 10, or more: the synthetic demo's batch stage also sends a
	// short batch after 50 ms without input, which a loaded machine can cause.
	if m := regexp.MustCompile(`300 samples in (\d+) batches`).FindStringSubmatch(out.String()); m == nil {
		t.Errorf("summary lacks the sample and batch counts:\n%s", out.String())
	} else if n, _ := strconv.Atoi(m[1]); n < 30 || n > 300 {
		t.Errorf("300 samples in %d batches of at most 10, want 30 to 300", n)
	}
	for _, want := range []string{"generate", "decode", "batch", "consume", "WAIT IN s",
		"sources gated on this cgroup's memory pressure", "Memory pressure while running:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

func TestDemoOverGeneratedFolder(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if code := dispatch(context.Background(), &out, &out, []string{"gen", "jpeg", "-out", dir, "-n", "40", "-width", "96", "-height", "64"}); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, out.String())
	}
	out.Reset()
	if code := dispatch(context.Background(), &out, &out, []string{"demo", "-data", dir, "-batch", "16", "-epochs", "2"}); code != 0 {
		t.Fatalf("demo: exit %d: %s", code, out.String())
	}
	for _, want := range []string{"80 samples in 6 batches", "reader ", "read", "decode", "collate"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := dispatch(context.Background(), &out, &out, []string{"demo", "-data", dir + "/missing"}); code != 1 || !strings.Contains(out.String(), "missing") {
		t.Fatalf("demo on a missing folder: exit %d: %s", code, out.String())
	}
}

func TestDemoBudgetFromTheMemoryLimit(t *testing.T) {
	var out bytes.Buffer
	if code := dispatch(context.Background(), &out, &out, []string{"demo", "-items", "50", "-size", "1024", "-pressure=false"}); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "a quarter of the memory limit (") || strings.Contains(out.String(), "Memory pressure while running") {
		t.Fatalf("output:\n%s", out.String())
	}
}

func TestMetricsEndpointServesGraphMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := flow.New("scraped", flow.WithBudget(1<<20))
	flow.Collect(flow.FromSlice(g, "src", []int{1, 2, 3}), "sink", new([]int))
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(g.Collector()); err != nil {
		t.Fatal(err)
	}
	ms, err := serveMetrics("127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	resp, err := http.Get(ms.URL())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `psiflow_stage_items_out_total{graph="scraped",kind="source",stage="src"} 3`) {
		t.Fatalf("scrape of %s:\n%s", ms.URL(), body)
	}
}

// TestCPUProfileEnv checks that PSIFLOW_CPUPROFILE makes a command write a profile
// (gzip-compressed protobuf, as runtime/pprof writes it), and that a file that cannot
// be created fails the command, naming the variable.
func TestCPUProfileEnv(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cpu.pprof")
	t.Setenv(cpuProfileEnv, path)
	var out bytes.Buffer
	if code := dispatch(context.Background(), &out, &out, []string{"gen", "jpeg", "-out", filepath.Join(dir, "img"), "-n", "4", "-width", "64", "-height", "48"}); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile %s: %d bytes, not gzip", path, len(b))
	}
	t.Setenv(cpuProfileEnv, filepath.Join(dir, "missing", "cpu.pprof"))
	out.Reset()
	if code := dispatch(context.Background(), &out, &out, []string{"gen", "jpeg", "-out", filepath.Join(dir, "img2"), "-n", "1"}); code != 1 || !strings.Contains(out.String(), cpuProfileEnv) {
		t.Fatalf("exit %d, want 1 naming %s: %s", code, cpuProfileEnv, out.String())
	}
}
